import type { Client } from 'pg';
import type { OutboxConfig } from '../config';
import { OutboxError } from '../errors';

/**
 * How db:provision gives the CDC role the right to replicate, decided from the connecting admin
 * (docs/managed-postgres.md has the providers):
 * - `superuser`: self-hosted; everything is allowed.
 * - `createrole-replication`: PostgreSQL 16+, an admin with CREATEROLE and REPLICATION (what most managed
 *   services hand out). Since 16 such an admin may give REPLICATION to the roles it creates, and it
 *   administers them (ADMIN OPTION), but it may change only the attributes it has itself.
 * - `rds_replication`: Amazon RDS and Aurora. Their admin lacks the REPLICATION attribute; membership in
 *   their `rds_replication` role carries the right to replicate instead, and the admin may grant it.
 * - `cloudsqlsuperuser`: Cloud SQL, whose admin role is a member of `cloudsqlsuperuser` and, by Google's
 *   documentation, may `ALTER ROLE … WITH REPLICATION` on any major version.
 */
export type ProvisionPath = 'superuser' | 'createrole-replication' | 'rds_replication' | 'cloudsqlsuperuser';

export interface PreflightFacts {
  database: string;
  version: string;
  versionNum: number;
  walLevel: string;
  slots: { max: number; used: number; ours: boolean };
  walSenders: { max: number; used: number };
  role: {
    name: string; superuser: boolean; createRole: boolean; replication: boolean; canCreateInDatabase: boolean;
    /**
     * `rds_replication` exists and this role may grant it: ADMIN OPTION on it, or membership in RDS's
     * rds_superuser, which AWS documents as allowed to grant it (whichever way RDS implements that).
     */
    canGrantRdsReplication: boolean;
    /** This role is a member of Cloud SQL's `cloudsqlsuperuser`. */
    cloudSqlSuperuser: boolean;
    /** This role may grant `pg_monitor` (superuser, or ADMIN OPTION on it): the watchdog's role wants it. */
    canGrantPgMonitor: boolean;
  };
  /** The path provisioning takes, or null when the role cannot provision (preflightProblems says why). */
  path: ProvisionPath | null;
  /** Why that path, in one sentence: the CLI prints it. */
  pathReason: string;
}

export const MIN_SERVER_VERSION_NUM = 130000;

/** pg_has_role errors on a role that does not exist: ask only when it does (CASE evaluates lazily). */
const hasRole = (role: string, privilege: string) =>
  `CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${role}') THEN pg_has_role(current_user, '${role}', '${privilege}') ELSE false END`;
const canAdmin = (role: string) => hasRole(role, 'MEMBER WITH ADMIN OPTION');
const isMember = (role: string) => hasRole(role, 'MEMBER');

export async function readPreflightFacts(client: Client, config: OutboxConfig): Promise<PreflightFacts> {
  const { rows } = await client.query<{
    database: string; version: string; version_num: number; wal_level: string; max_slots: number; used_slots: number; our_slot: boolean;
    max_senders: number; used_senders: number; role: string; rolsuper: boolean; rolcreaterole: boolean; rolreplication: boolean; can_create: boolean;
    rds_replication: boolean; cloudsql: boolean; pg_monitor: boolean;
  }>(
    `SELECT current_database() AS database, current_setting('server_version') AS version,
            current_setting('server_version_num')::int AS version_num,
            current_setting('wal_level') AS wal_level,
            current_setting('max_replication_slots')::int AS max_slots,
            (SELECT count(*) FROM pg_replication_slots)::int AS used_slots,
            EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1) AS our_slot,
            current_setting('max_wal_senders')::int AS max_senders,
            (SELECT count(*) FROM pg_stat_replication)::int AS used_senders,
            current_user AS role, r.rolsuper, r.rolcreaterole, r.rolreplication,
            has_database_privilege(current_database(), 'CREATE') AS can_create,
            (${canAdmin('rds_replication')} OR (${isMember('rds_superuser')} AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rds_replication'))) AS rds_replication,
            ${isMember('cloudsqlsuperuser')} AS cloudsql,
            ${canAdmin('pg_monitor')} AS pg_monitor
       FROM pg_roles r WHERE r.rolname = current_user`,
    [config.connector.slotName],
  );
  const r = rows[0];
  const role = {
    name: r.role, superuser: r.rolsuper, createRole: r.rolcreaterole, replication: r.rolreplication, canCreateInDatabase: r.can_create,
    canGrantRdsReplication: r.rds_replication, cloudSqlSuperuser: r.cloudsql, canGrantPgMonitor: r.rolsuper || r.pg_monitor,
  };
  return {
    database: r.database,
    version: r.version,
    versionNum: r.version_num,
    walLevel: r.wal_level,
    slots: { max: r.max_slots, used: r.used_slots, ours: r.our_slot },
    walSenders: { max: r.max_senders, used: r.used_senders },
    role,
    ...choosePath(role, r.version_num),
  };
}

/** The first path that works for this role, in the order of ProvisionPath's comment. */
export function choosePath(role: Omit<PreflightFacts['role'], 'canCreateInDatabase'>, versionNum: number): { path: ProvisionPath | null; pathReason: string } {
  const who = `role ${role.name}`;
  if (role.superuser) return { path: 'superuser', pathReason: `${who} is a superuser` };
  if (!role.createRole) return { path: null, pathReason: `${who} is not a superuser and has no CREATEROLE` };
  if (versionNum >= 160000 && role.replication) {
    return { path: 'createrole-replication', pathReason: `${who} has CREATEROLE and REPLICATION on PostgreSQL 16+, so it may give REPLICATION to the CDC role it creates` };
  }
  if (role.canGrantRdsReplication) {
    return { path: 'rds_replication', pathReason: `${who} may grant rds_replication (Amazon RDS / Aurora): the CDC role becomes its member instead of getting the REPLICATION attribute` };
  }
  if (role.cloudSqlSuperuser) {
    return { path: 'cloudsqlsuperuser', pathReason: `${who} is a member of cloudsqlsuperuser (Cloud SQL), which may give REPLICATION to the CDC role` };
  }
  const missing = versionNum >= 160000 ? 'REPLICATION (ALTER ROLE … REPLICATION, as a superuser or a role that has it)' : 'SUPERUSER (before PostgreSQL 16 only a superuser may create a REPLICATION role)';
  return { path: null, pathReason: `${who} has CREATEROLE but cannot give the CDC role the right to replicate: it lacks ${missing}, and no rds_replication or cloudsqlsuperuser role is available to it` };
}

/** Every reason the database cannot carry the outbox pipeline, each with its fix. Empty when fine. */
export function preflightProblems(facts: PreflightFacts): string[] {
  const problems: string[] = [];
  if (facts.versionNum < MIN_SERVER_VERSION_NUM) {
    problems.push(`PostgreSQL ${facts.version} is too old: 13 or newer is needed (max_slot_wal_keep_size, pgoutput features). Upgrade the server.`);
  }
  if (facts.walLevel !== 'logical') {
    problems.push(
      `wal_level is '${facts.walLevel}', logical decoding needs 'logical': run ALTER SYSTEM SET wal_level = logical; and restart PostgreSQL ` +
        '(managed services have their own parameter, e.g. rds.logical_replication = 1 or cloudsql.logical_decoding = on: docs/managed-postgres.md).',
    );
  }
  if (!facts.slots.ours && facts.slots.max - facts.slots.used < 1) {
    problems.push(`no free replication slot: max_replication_slots = ${facts.slots.max} and ${facts.slots.used} are used. Drop unused slots (SELECT slot_name, active FROM pg_replication_slots) or raise max_replication_slots and restart.`);
  }
  if (facts.walSenders.max - facts.walSenders.used < 1) {
    problems.push(`no free WAL sender: max_wal_senders = ${facts.walSenders.max} and ${facts.walSenders.used} are in use. Raise max_wal_senders and restart.`);
  }
  const { role } = facts;
  const { path, pathReason } = choosePath(role, facts.versionNum);
  if (!path) {
    problems.push(
      `role ${role.name} cannot provision: ${pathReason}. It needs SUPERUSER; or CREATEROLE plus, on PostgreSQL 16+, REPLICATION ` +
        '(or, on Amazon RDS / Aurora, rds_replication WITH ADMIN OPTION, which their admin has; or, on Cloud SQL, membership in cloudsqlsuperuser) ' +
        `(has superuser=${role.superuser}, createrole=${role.createRole}, replication=${role.replication}). Connect as such an admin role (PGUSER); see docs/managed-postgres.md.`,
    );
  }
  if (!role.superuser && !role.canCreateInDatabase) {
    problems.push(`role ${role.name} has no CREATE on database ${facts.database}: run GRANT CREATE ON DATABASE ${facts.database} TO ${role.name}; as its owner, or connect as the database's owner.`);
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
