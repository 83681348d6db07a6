import type { Client } from 'pg';
import type { OutboxConfig } from '../config';
import { qualified } from '../db';

/**
 * Row-level security on the outbox, so the application role's DELETE (needed by writers with
 * deleteAfterInsert) and its SELECT of ids reach only rows of its own transaction:
 *
 * - `outbox_unrestricted` (permissive, every role): privileges alone decide for everyone else (the
 *   CDC role, the admin's relay, roles the user granted by hand), exactly as without RLS. The table
 *   owner and superusers bypass RLS anyway.
 * - `outbox_app_own_transaction` (restrictive, the application role): a row is visible and deletable
 *   only while `created_at = now()`. The writer never sets created_at (nor may the role: its INSERT
 *   grant leaves that column out), so the column default stamps the transaction's start time, the
 *   same for every statement and savepoint of that transaction and a time no other transaction can
 *   pick. A compromised application can therefore no longer delete (or list) other transactions'
 *   events, e.g. rows the polling relay has not published yet. (xmin would miss rows inserted under a
 *   savepoint, whose xid is the subtransaction's.)
 *
 * Created only when missing or different: CREATE/DROP POLICY lock the table, and a re-provision of a
 * busy database should not queue behind its writers.
 */
export interface PolicySpec {
  name: string;
  permissive: 'PERMISSIVE' | 'RESTRICTIVE';
  roles: string[];
  cmd: 'ALL';
  qual: string;
  withCheck: string;
}

export function outboxPolicies(config: OutboxConfig): PolicySpec[] {
  return [
    { name: 'outbox_unrestricted', permissive: 'PERMISSIVE', roles: ['public'], cmd: 'ALL', qual: 'true', withCheck: 'true' },
    { name: 'outbox_app_own_transaction', permissive: 'RESTRICTIVE', roles: [config.roles.app], cmd: 'ALL', qual: '(created_at = now())', withCheck: 'true' },
  ];
}

/** Enables RLS on the outbox and makes its policies exactly `outboxPolicies`. True if anything changed. */
export async function ensureOutboxPolicies(client: Client, config: OutboxConfig): Promise<boolean> {
  const table = qualified(config.outbox.schema, config.outbox.table);
  const wanted = outboxPolicies(config);
  const { rows } = await client.query<{ rowsecurity: boolean; policies: Array<{ name: string; permissive: string; roles: string[]; cmd: string; qual: string; with_check: string }> | null }>(
    `SELECT c.relrowsecurity AS rowsecurity,
            (SELECT json_agg(json_build_object('name', p.policyname, 'permissive', p.permissive, 'roles', p.roles, 'cmd', p.cmd, 'qual', p.qual, 'with_check', p.with_check))
               FROM pg_policies p WHERE p.schemaname = n.nspname AND p.tablename = c.relname) AS policies
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = $2`,
    [config.outbox.schema, config.outbox.table],
  );
  const row = rows[0];
  if (!row) return false; // no outbox table: the migrations make it first
  let changed = false;
  if (!row.rowsecurity) {
    await client.query(`ALTER TABLE ${table} ENABLE ROW LEVEL SECURITY`);
    changed = true;
  }
  const have = row.policies ?? [];
  const same = (w: PolicySpec, h: (typeof have)[number]) =>
    h.permissive === w.permissive && h.cmd === w.cmd && h.qual === w.qual && h.with_check === w.withCheck && JSON.stringify([...h.roles].sort()) === JSON.stringify([...w.roles].sort());
  // Policies of other names are the user's own and stay.
  for (const h of have) {
    const w = wanted.find((p) => p.name === h.name);
    if (w && !same(w, h)) {
      await client.query(`DROP POLICY ${client.escapeIdentifier(h.name)} ON ${table}`);
      changed = true;
    }
  }
  for (const w of wanted) {
    const h = have.find((p) => p.name === w.name);
    if (h && same(w, h)) continue;
    const roles = w.roles.map((r) => (r === 'public' ? 'PUBLIC' : client.escapeIdentifier(r))).join(', ');
    await client.query(`CREATE POLICY ${client.escapeIdentifier(w.name)} ON ${table} AS ${w.permissive} FOR ${w.cmd} TO ${roles} USING (${w.qual}) WITH CHECK (${w.withCheck})`);
    changed = true;
  }
  return changed;
}
