import type { Client } from 'pg';
import { ROLE_KINDS, type OutboxConfig } from '../config';
import { clientConfig, pgCode, withClient } from '../db';
import { OutboxError } from '../errors';
import type { Logger } from '../log';
import { assertPreflight, readPreflightFacts, type PreflightFacts } from './preflight';
import { ensureOutboxLimits, type LimitsReport } from './outbox-limits';
import { assertNotProvisioningAsRole, planRolePasswords } from './role-passwords';
import { ensureRelayNotify, type RelayNotifyReport } from './relay-notify';
import { ensureOutboxPolicies } from './row-policy';
import { scramVerifier } from './scram';
import { loadMigrations, renderSql, rolesSql, sqlValues, type Migration } from './sql-files';

export interface ProvisionOptions {
  log?: Logger;
  /** Run everything, report it, and roll back. */
  dryRun?: boolean;
}

export interface ProvisionReport {
  database: string;
  applied: string[];
  alreadyApplied: string[];
  rolesCreated: string[];
  passwordsSet: string[];
  /** Existing roles whose password was left as it is: no password was configured for them (not the local stack). */
  passwordsKept: string[];
  /** The outbox's limit constraints (src/provision/outbox-limits.ts) this run added or replaced, and any left NOT VALID. */
  limits: LimitsReport;
  /** `created` again after `connector:delete --drop-slot` dropped it; `repaired` if its tables or operations drifted. */
  publication: 'present' | 'created' | 'repaired';
  /** The relay's notify trigger on the outbox (relay.notify): created, dropped, or already as wanted. */
  relayNotify: RelayNotifyReport;
  preflight: PreflightFacts;
  dryRun: boolean;
}

/** Transient conflicts between concurrent provisioners of different databases (roles are shared). */
const RETRY_CODES = new Set(['40001', '40P01', 'XX000']);

/**
 * Idempotent provisioning of one database: preflight, then in ONE transaction under an advisory lock
 * (two runs cannot race) the pending numbered migrations, the roles and their grants. Either all of
 * it commits or none of it does.
 */
export async function provision(config: OutboxConfig, options: ProvisionOptions = {}): Promise<ProvisionReport> {
  assertNotProvisioningAsRole(config);
  const migrations = loadMigrations();
  return withClient(clientConfig(config.database), async (client) => {
    const preflight = await readPreflightFacts(client, config);
    assertPreflight(preflight);
    for (let attempt = 1; ; attempt++) {
      try {
        return await provisionOnce(client, config, migrations, preflight, options);
      } catch (error) {
        if (attempt >= 3 || !RETRY_CODES.has(pgCode(error) ?? '')) throw wrap(error);
        options.log?.debug({ attempt, code: pgCode(error) }, 'provision.retry');
      }
    }
  });
}

async function provisionOnce(client: Client, config: OutboxConfig, migrations: Migration[], preflight: PreflightFacts, options: ProvisionOptions): Promise<ProvisionReport> {
  const v = sqlValues(config);
  const report: ProvisionReport = {
    database: config.database.database,
    applied: [],
    alreadyApplied: [],
    rolesCreated: [],
    passwordsSet: [],
    passwordsKept: [],
    limits: { changed: [], notValidated: [] },
    publication: 'present',
    relayNotify: 'absent',
    preflight,
    dryRun: Boolean(options.dryRun),
  };
  await client.query('BEGIN');
  try {
    // One lock per database and outbox schema; released by COMMIT/ROLLBACK.
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`outbox-router:provision:${config.outbox.schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${v.schema}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${v.migrations} (id int PRIMARY KEY, name text NOT NULL, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const { rows } = await client.query<{ id: number; name: string; checksum: string }>(`SELECT id, name, checksum FROM ${v.migrations} ORDER BY id`);
    const recorded = new Map(rows.map((r) => [r.id, r]));
    for (const migration of migrations) {
      const done = recorded.get(migration.id);
      if (done) {
        if (done.checksum !== migration.checksum && migration.formerChecksums.includes(done.checksum)) {
          // Recorded by an earlier version's checksum (whole text, comments included): the same statements.
          await client.query(`UPDATE ${v.migrations} SET checksum = $2 WHERE id = $1`, [migration.id, migration.checksum]);
        } else if (done.checksum !== migration.checksum) {
          throw new OutboxError(
            'MIGRATION_CHANGED',
            `Migration ${migration.id} (${migration.name}) was applied to ${config.database.database} with checksum ${done.checksum}, but sql/migrations now has ${migration.checksum}. ` +
              'Applied migrations must never be edited: restore the file and add a new numbered migration instead.',
          );
        }
        report.alreadyApplied.push(`${migration.id}_${migration.name}`);
        continue;
      }
      await client.query(renderSql(migration.template, config, `sql/migrations/${migration.id}_${migration.name}.sql`));
      await client.query(`INSERT INTO ${v.migrations} (id, name, checksum) VALUES ($1, $2, $3)`, [migration.id, migration.name, migration.checksum]);
      report.applied.push(`${migration.id}_${migration.name}`);
    }
    report.publication = await ensurePublication(client, config, migrations);
    const roleNames = ROLE_KINDS.map((kind) => config.roles[kind]);
    const existing = await client.query<{ rolname: string }>('SELECT rolname FROM pg_roles WHERE rolname = ANY($1::text[])', [roleNames]);
    // Decided for all roles before any is touched: a missing password names every variable at once.
    for (const step of planRolePasswords(config, new Set(existing.rows.map((r) => r.rolname)))) {
      if (await createRoleIfMissing(client, step.role)) report.rolesCreated.push(step.role);
      if (!step.password) report.passwordsKept.push(step.role);
      else if (await setPasswordIfChanged(client, step.role, step.password)) report.passwordsSet.push(step.role);
    }
    await client.query(rolesSql(config));
    await ensureOutboxPolicies(client, config);
    report.limits = await ensureOutboxLimits(client, config);
    report.relayNotify = await ensureRelayNotify(client, config);
    if (report.limits.notValidated.length > 0) {
      options.log?.warn(
        { constraints: report.limits.notValidated },
        `provision: existing outbox rows break ${report.limits.notValidated.join(', ')}; new rows are checked, the old ones are not until they are deleted and db:provision runs again`,
      );
    }
    await client.query(options.dryRun ? 'ROLLBACK' : 'COMMIT');
    options.log?.info(
      { database: report.database, applied: report.applied, rolesCreated: report.rolesCreated, dryRun: report.dryRun },
      report.applied.length ? `provision: applied ${report.applied.join(', ')}` : 'provision: schema up to date',
    );
    return report;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

/**
 * The publication is created by migration 004, but it can disappear afterwards (connector:delete
 * --drop-slot drops it) or drift (tables added or removed by hand): bring it back to exactly the
 * outbox and heartbeat tables, inserts and updates.
 */
async function ensurePublication(client: Client, config: OutboxConfig, migrations: Migration[]): Promise<ProvisionReport['publication']> {
  const v = sqlValues(config);
  const { outbox } = config;
  const found = await client.query<{ pubinsert: boolean; pubupdate: boolean; pubdelete: boolean; pubtruncate: boolean }>(
    'SELECT pubinsert, pubupdate, pubdelete, pubtruncate FROM pg_publication WHERE pubname = $1',
    [outbox.publication],
  );
  if (found.rowCount === 0) {
    const create = migrations.find((m) => m.name === 'publication');
    if (!create) throw new OutboxError('PROVISION_FAILED', 'sql/migrations has no publication migration to recreate the publication from.');
    await client.query(renderSql(create.template, config, `sql/migrations/${create.id}_${create.name}.sql`));
    return 'created';
  }
  let repaired = false;
  const flags = found.rows[0];
  if (!flags?.pubinsert || !flags.pubupdate || flags.pubdelete || flags.pubtruncate) {
    await client.query(`ALTER PUBLICATION ${v.publication} SET (publish = 'insert, update')`);
    repaired = true;
  }
  const tables = await client.query<{ schemaname: string; tablename: string }>('SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1', [outbox.publication]);
  const want = new Set([`${outbox.schema}.${outbox.table}`, `${outbox.schema}.${outbox.heartbeatTable}`]);
  const have = new Set(tables.rows.map((r) => `${r.schemaname}.${r.tablename}`));
  if (have.size !== want.size || [...want].some((t) => !have.has(t))) {
    await client.query(`ALTER PUBLICATION ${v.publication} SET TABLE ${v.outbox}, ${v.heartbeat}`);
    repaired = true;
  }
  return repaired ? 'repaired' : 'present';
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

/** Leaves a role's password alone when it already verifies, so a second run changes nothing. */
async function setPasswordIfChanged(client: Client, role: string, password: string): Promise<boolean> {
  const current = await client
    .query<{ rolpassword: string | null }>('SELECT rolpassword FROM pg_authid WHERE rolname = $1', [role])
    .then((r) => r.rows[0]?.rolpassword ?? null)
    .catch(() => null); // pg_authid is superuser-only: without it, always set
  const match = current ? /^SCRAM-SHA-256\$(\d+):([^$]+)\$/.exec(current) : null;
  if (match && current === scramVerifier(password, Number(match[1]), Buffer.from(match[2] as string, 'base64'))) return false;
  await client.query(`ALTER ROLE ${client.escapeIdentifier(role)} PASSWORD ${client.escapeLiteral(scramVerifier(password))}`);
  return true;
}

function wrap(error: unknown): unknown {
  if (error instanceof OutboxError) return error;
  const code = pgCode(error);
  if (!code) return error;
  return new OutboxError('PROVISION_FAILED', `Provisioning failed and was rolled back (SQLSTATE ${code}): ${(error as Error).message}.`, {
    cause: error,
    retriable: RETRY_CODES.has(code),
    details: { code },
  });
}
