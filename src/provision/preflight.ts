import type { Client } from 'pg';
import type { OutboxConfig } from '../config';
import { OutboxError } from '../errors';

export interface PreflightFacts {
  version: string;
  versionNum: number;
  walLevel: string;
  slots: { max: number; used: number; ours: boolean };
  walSenders: { max: number; used: number };
  role: { name: string; superuser: boolean; createRole: boolean; replication: boolean; canCreateInDatabase: boolean };
}

export const MIN_SERVER_VERSION_NUM = 130000;

export async function readPreflightFacts(client: Client, config: OutboxConfig): Promise<PreflightFacts> {
  const { rows } = await client.query<{
    version: string; version_num: number; wal_level: string; max_slots: number; used_slots: number; our_slot: boolean;
    max_senders: number; used_senders: number; role: string; rolsuper: boolean; rolcreaterole: boolean; rolreplication: boolean; can_create: boolean;
  }>(
    `SELECT current_setting('server_version') AS version,
            current_setting('server_version_num')::int AS version_num,
            current_setting('wal_level') AS wal_level,
            current_setting('max_replication_slots')::int AS max_slots,
            (SELECT count(*) FROM pg_replication_slots)::int AS used_slots,
            EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1) AS our_slot,
            current_setting('max_wal_senders')::int AS max_senders,
            (SELECT count(*) FROM pg_stat_replication)::int AS used_senders,
            current_user AS role, r.rolsuper, r.rolcreaterole, r.rolreplication,
            has_database_privilege(current_database(), 'CREATE') AS can_create
       FROM pg_roles r WHERE r.rolname = current_user`,
    [config.connector.slotName],
  );
  const r = rows[0];
  return {
    version: r.version,
    versionNum: r.version_num,
    walLevel: r.wal_level,
    slots: { max: r.max_slots, used: r.used_slots, ours: r.our_slot },
    walSenders: { max: r.max_senders, used: r.used_senders },
    role: { name: r.role, superuser: r.rolsuper, createRole: r.rolcreaterole, replication: r.rolreplication, canCreateInDatabase: r.can_create },
  };
}

/** Every reason the database cannot carry the outbox pipeline, each with its fix. Empty when fine. */
export function preflightProblems(facts: PreflightFacts): string[] {
  const problems: string[] = [];
  if (facts.versionNum < MIN_SERVER_VERSION_NUM) {
    problems.push(`PostgreSQL ${facts.version} is too old: 13 or newer is needed (max_slot_wal_keep_size, pgoutput features). Upgrade the server.`);
  }
  if (facts.walLevel !== 'logical') {
    problems.push(`wal_level is '${facts.walLevel}', logical decoding needs 'logical': run ALTER SYSTEM SET wal_level = logical; and restart PostgreSQL.`);
  }
  if (!facts.slots.ours && facts.slots.max - facts.slots.used < 1) {
    problems.push(`no free replication slot: max_replication_slots = ${facts.slots.max} and ${facts.slots.used} are used. Drop unused slots (SELECT slot_name, active FROM pg_replication_slots) or raise max_replication_slots and restart.`);
  }
  if (facts.walSenders.max - facts.walSenders.used < 1) {
    problems.push(`no free WAL sender: max_wal_senders = ${facts.walSenders.max} and ${facts.walSenders.used} are in use. Raise max_wal_senders and restart.`);
  }
  const { role } = facts;
  // Creating a REPLICATION role takes superuser before PostgreSQL 16, CREATEROLE plus REPLICATION after.
  const canCreateCdcRole = role.superuser || (role.createRole && (facts.versionNum >= 160000 ? role.replication : false));
  if (!role.superuser && !(canCreateCdcRole && role.canCreateInDatabase)) {
    problems.push(
      `role ${role.name} cannot provision: it needs SUPERUSER, or CREATEROLE${facts.versionNum >= 160000 ? ' and REPLICATION' : ' (on PostgreSQL < 16: SUPERUSER)'} plus CREATE on the database ` +
        `(has superuser=${role.superuser}, createrole=${role.createRole}, replication=${role.replication}, create on database=${role.canCreateInDatabase}). Connect as an admin role (PGUSER).`,
    );
  }
  return problems;
}

export function assertPreflight(facts: PreflightFacts): void {
  const problems = preflightProblems(facts);
  if (problems.length > 0) {
    throw new OutboxError('PREFLIGHT_FAILED', `The database is not ready for the outbox pipeline; nothing was changed:\n${problems.map((p) => `  - ${p}`).join('\n')}`, {
      details: { problems },
    });
  }
}
