import { Client } from 'pg';
import { ROLE_KINDS, type OutboxConfig, type RoleKind } from '../config';
import { clientConfig, pgCode } from '../db';
import type { PreflightFacts } from './preflight';
import { planRolePasswords } from './role-passwords';
import { scramVerifier } from './scram';
import { atStep } from './steps';

export interface RoleSetupReport {
  rolesCreated: string[];
  passwordsSet: string[];
  passwordsKept: string[];
  /** `role: ATTRIBUTE …` for each role whose attributes were brought back to what it needs. */
  attributesChanged: string[];
  /** How the CDC role may replicate: its REPLICATION attribute, or membership in RDS's rds_replication. */
  replicationVia: 'attribute' | 'rds_replication';
  /** What could not be done with the admin's rights and is not needed to run: each with its fix. */
  skipped: string[];
}

interface RoleRow { rolname: string; rolcanlogin: boolean; rolsuper: boolean; rolcreatedb: boolean; rolcreaterole: boolean; rolbypassrls: boolean; rolreplication: boolean }

/**
 * Creates the five roles, sets their passwords and attributes, and gives the CDC role the right to
 * replicate, inside the provisioning transaction. Written for an admin that is not a superuser
 * (docs/managed-postgres.md): it never reads pg_authid, and it changes only what differs from what each
 * role needs, because since PostgreSQL 16 a CREATEROLE admin may change only the attributes it has itself
 * (`ALTER ROLE x NOSUPERUSER` is refused even when x is no superuser).
 */
export async function ensureRoles(client: Client, config: OutboxConfig, preflight: PreflightFacts): Promise<RoleSetupReport> {
  const admin = preflight.role.name;
  const report: RoleSetupReport = { rolesCreated: [], passwordsSet: [], passwordsKept: [], attributesChanged: [], replicationVia: preflight.path === 'rds_replication' ? 'rds_replication' : 'attribute', skipped: [] };
  const names = ROLE_KINDS.map((kind) => config.roles[kind]);
  const existing = await client.query<{ rolname: string }>('SELECT rolname FROM pg_roles WHERE rolname = ANY($1::text[])', [names]);
  // Decided for all roles before any is touched: a missing password names every variable at once.
  for (const step of planRolePasswords(config, new Set(existing.rows.map((r) => r.rolname)))) {
    const created = await atStep({ step: 'create role', role: step.role, admin }, () => createRoleIfMissing(client, step.role));
    if (created) report.rolesCreated.push(step.role);
    if (!step.password) report.passwordsKept.push(step.role);
    else if (await atStep({ step: 'set password', role: step.role, admin }, () => setPasswordIfChanged(client, config, preflight, step.role, step.password as string, created))) {
      report.passwordsSet.push(step.role);
    }
  }
  const { rows } = await client.query<RoleRow>(
    'SELECT rolname, rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolbypassrls, rolreplication FROM pg_roles WHERE rolname = ANY($1::text[])',
    [names],
  );
  for (const kind of ROLE_KINDS) {
    const role = config.roles[kind];
    const row = rows.find((r) => r.rolname === role) as RoleRow;
    const clauses = attributeChanges(row, kind, report.replicationVia);
    if (clauses.length === 0) continue;
    await atStep({ step: 'set role attributes', role, admin }, () => client.query(`ALTER ROLE ${client.escapeIdentifier(role)} ${clauses.join(' ')}`));
    report.attributesChanged.push(`${role}: ${clauses.join(' ')}`);
  }
  if (report.replicationVia === 'rds_replication') {
    const cdc = config.roles.cdc;
    const { rows: member } = await client.query<{ m: boolean }>("SELECT pg_has_role($1, 'rds_replication', 'MEMBER') AS m", [cdc]);
    if (!member[0]?.m) await atStep({ step: 'grant rds_replication', role: cdc, admin }, () => client.query(`GRANT rds_replication TO ${client.escapeIdentifier(cdc)}`));
  }
  await ensurePgMonitor(client, config.roles.monitor, preflight, report);
  return report;
}

/**
 * The clauses that bring a role to exactly what it needs: LOGIN and none of SUPERUSER, CREATEDB,
 * CREATEROLE, BYPASSRLS; REPLICATION for the CDC role only, unless rds_replication carries it (then
 * its attribute is left as found: removing it would need REPLICATION, which RDS's admin lacks).
 */
export function attributeChanges(row: Omit<RoleRow, 'rolname'>, kind: RoleKind, replicationVia: RoleSetupReport['replicationVia']): string[] {
  const clauses: string[] = [];
  if (!row.rolcanlogin) clauses.push('LOGIN');
  if (row.rolsuper) clauses.push('NOSUPERUSER');
  if (row.rolcreatedb) clauses.push('NOCREATEDB');
  if (row.rolcreaterole) clauses.push('NOCREATEROLE');
  if (row.rolbypassrls) clauses.push('NOBYPASSRLS');
  const wantReplication = kind === 'cdc' ? (replicationVia === 'attribute' ? true : row.rolreplication) : false;
  if (row.rolreplication !== wantReplication) clauses.push(wantReplication ? 'REPLICATION' : 'NOREPLICATION');
  return clauses;
}

/**
 * The watchdog's role reads the monitoring views through pg_monitor. Granting it takes ADMIN OPTION on
 * pg_monitor, which a CREATEROLE admin does not get by itself (providers' admins usually have it): then
 * the grant is skipped, not failed, since the pipeline runs without it and only the watchdog's view of
 * pg_stat_replication is poorer; the report and the log say so, with the grant to run.
 */
async function ensurePgMonitor(client: Client, monitor: string, preflight: PreflightFacts, report: RoleSetupReport): Promise<void> {
  const { rows } = await client.query<{ m: boolean }>("SELECT pg_has_role($1, 'pg_monitor', 'MEMBER') AS m", [monitor]);
  if (rows[0]?.m) return;
  if (preflight.role.canGrantPgMonitor) {
    await atStep({ step: 'grant pg_monitor', role: monitor, admin: preflight.role.name }, () => client.query(`GRANT pg_monitor TO ${client.escapeIdentifier(monitor)}`));
    return;
  }
  report.skipped.push(
    `GRANT pg_monitor TO ${monitor}: ${preflight.role.name} has no ADMIN OPTION on pg_monitor. The watchdog still reads its slots, but not the details of ` +
      `pg_stat_replication; run that GRANT as a superuser or the provider's admin (or GRANT pg_monitor TO ${preflight.role.name} WITH ADMIN OPTION) and provision again.`,
  );
}

async function createRoleIfMissing(client: Client, role: string): Promise<boolean> {
  const { rowCount } = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [role]);
  if (rowCount) return false;
  // A concurrent provisioner of another database may create it between our check and CREATE.
  await client.query('SAVEPOINT create_role');
  try {
    await client.query(`CREATE ROLE ${client.escapeIdentifier(role)} LOGIN`);
    await client.query('RELEASE SAVEPOINT create_role');
    return true;
  } catch (error) {
    await client.query('ROLLBACK TO SAVEPOINT create_role');
    if (pgCode(error) === '42710' || pgCode(error) === '23505') return false;
    throw error;
  }
}

/**
 * Sets the configured password unless the role already has it, so a second run changes nothing. How
 * "already has it" is known depends on the admin:
 * - a superuser reads the stored SCRAM verifier in pg_authid and recomputes it with its salt;
 * - anyone else may not read pg_authid (reading it aborts the transaction), so it logs in as the role
 *   with that password from a second connection. Only a login that the server really checked by
 *   password counts: PostgreSQL 16+'s system_user names the method (NULL under trust). Before 16 there
 *   is no such proof, so the password is set again: a fresh verifier of the same password, which ends
 *   no session and changes nothing a client sees.
 * A role created by this run has no password yet: set.
 */
async function setPasswordIfChanged(client: Client, config: OutboxConfig, preflight: PreflightFacts, role: string, password: string, created: boolean): Promise<boolean> {
  if (!created && (preflight.role.superuser ? await storedVerifierMatches(client, role, password) : await loginProves(config, preflight, role, password))) return false;
  await client.query(`ALTER ROLE ${client.escapeIdentifier(role)} PASSWORD ${client.escapeLiteral(scramVerifier(password))}`);
  return true;
}

async function storedVerifierMatches(client: Client, role: string, password: string): Promise<boolean> {
  const { rows } = await client.query<{ rolpassword: string | null }>('SELECT rolpassword FROM pg_authid WHERE rolname = $1', [role]);
  const current = rows[0]?.rolpassword ?? null;
  const match = current ? /^SCRAM-SHA-256\$(\d+):([^$]+)\$/.exec(current) : null;
  return Boolean(match && current === scramVerifier(password, Number(match[1]), Buffer.from(match[2] as string, 'base64')));
}

const PASSWORD_METHODS = /^(scram-sha-256|md5|password):/;

async function loginProves(config: OutboxConfig, preflight: PreflightFacts, role: string, password: string): Promise<boolean> {
  if (preflight.versionNum < 160000) return false;
  const probe = new Client(clientConfig(config.database, { user: role, password, application_name: 'outbox-router provision probe' }));
  probe.on('error', () => {});
  try {
    await probe.connect();
    const { rows } = await probe.query<{ method: string | null }>('SELECT system_user AS method');
    return PASSWORD_METHODS.test(rows[0]?.method ?? '');
  } catch {
    return false; // a wrong password (28P01), no CONNECT yet, pg_hba: set it
  } finally {
    await probe.end().catch(() => {});
  }
}
