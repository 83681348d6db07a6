import type { Client } from 'pg';
import type { OutboxConfig } from '../config';
import { qualified } from '../db';
import { NOTIFY_TRIGGER, relayChannel } from '../relay/wake';

/** What this run did to the notify trigger: `present`/`absent` when it was already as relay.notify wants. */
export type RelayNotifyReport = 'created' | 'present' | 'dropped' | 'absent';

/**
 * The polling relay's wake-up (relay.notify): a statement-level AFTER INSERT trigger on the outbox that
 * sends one NOTIFY on the relay's channel. PostgreSQL delivers it at COMMIT (never for a rolled-back
 * transaction) and folds identical notifications of one transaction into one, so a transaction costs
 * one notification however many events or statements it writes. Made only with relay.notify: a
 * CDC-only deployment has no trigger and pays nothing; turning the setting off drops it again. The
 * price for the others: PostgreSQL serializes the commits of notifying transactions (a database-wide
 * lock on the notification queue, held through the commit's WAL flush).
 *
 * The function is named like the channel (one per outbox table) and calls pg_catalog.pg_notify by its
 * qualified name, so no search_path can redirect it. Nobody calls it directly: EXECUTE is revoked from
 * PUBLIC (a trigger runs its function without that check). Created or dropped only when it differs, as
 * CREATE/DROP TRIGGER lock the table against writers.
 */
export async function ensureRelayNotify(client: Client, config: OutboxConfig): Promise<RelayNotifyReport> {
  const { schema, table } = config.outbox;
  const channel = relayChannel(schema, table);
  const fn = qualified(schema, channel);
  const { rows } = await client.query<{ present: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
                     WHERE n.nspname = $1 AND c.relname = $2 AND g.tgname = $3) AS present`,
    [schema, table, NOTIFY_TRIGGER],
  );
  const present = Boolean(rows[0]?.present);
  const name = client.escapeIdentifier(NOTIFY_TRIGGER);
  const on = qualified(schema, table);
  if (!config.relay.notify) {
    if (!present) return 'absent';
    await client.query(`DROP TRIGGER ${name} ON ${on}`);
    await client.query(`DROP FUNCTION IF EXISTS ${fn}()`);
    return 'dropped';
  }
  // Replaced every run (no table lock): a function changed by hand is brought back.
  await client.query(
    `CREATE OR REPLACE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_catalog.pg_notify('${channel}', ''); RETURN NULL; END $$`,
  );
  await client.query(`REVOKE ALL ON FUNCTION ${fn}() FROM PUBLIC`);
  if (present) return 'present';
  await client.query(`CREATE TRIGGER ${name} AFTER INSERT ON ${on} FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`);
  return 'created';
}
