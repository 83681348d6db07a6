import type { Client } from 'pg';
import type { OutboxConfig } from '../config';
import { clientConfig, pgCode, withClient } from '../db';
import { OutboxError } from '../errors';
import type { Logger } from '../log';
import { assertPreflight, readPreflightFacts, type PreflightFacts } from './preflight';
import { ensureOutboxLimits, validateOutboxLimits, type LimitsReport } from './outbox-limits';
import { ensureOutboxPartitioned, type PartitionedReport } from './outbox-partitioned';
import { assertNotProvisioningAsRole } from './role-passwords';
import { ensureRoles, type RoleSetupReport } from './role-setup';
import { ensureRelayNotify, type RelayNotifyReport } from './relay-notify';
import { ensureOutboxPolicies } from './row-policy';
import { RETRY_CODES, atStep, sqlState, stepFailure } from './steps';
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
  /** `role: ATTRIBUTE …` for each role whose attributes were brought back to what it needs. */
  attributesChanged: string[];
  /** How the CDC role may replicate: its REPLICATION attribute, or membership in RDS's rds_replication. */
  replicationVia: RoleSetupReport['replicationVia'];
  /** Grants the admin may not give and the pipeline can run without, each with its fix (also logged). */
  skipped: string[];
  /** The outbox's limit constraints (src/provision/outbox-limits.ts) this run added or replaced, and any left NOT VALID. */
  limits: LimitsReport;
  /** `created` again after `connector:delete --drop-slot` dropped it; `repaired` if its tables or operations drifted. */
  publication: 'present' | 'created' | 'repaired';
  /** outbox.cleanupMode 'partition': the outbox was converted by this run, or already partitioned. */
  partitioned: PartitionedReport;
  /** The relay's notify trigger on the outbox (relay.notify): created, dropped, or already as wanted. */
  relayNotify: RelayNotifyReport;
  preflight: PreflightFacts;
  dryRun: boolean;
}


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
    options.log?.info({ path: preflight.path }, `provision: as ${preflight.role.name}, path ${preflight.path}: ${preflight.pathReason}`);
    for (let attempt = 1; ; attempt++) {
      try {
        return await provisionOnce(client, config, migrations, preflight, options);
      } catch (error) {
        if (attempt >= 3 || !RETRY_CODES.has(sqlState(error) ?? '')) throw stepFailure(error, { step: 'schema', admin: preflight.role.name });
        options.log?.debug({ attempt, code: sqlState(error) }, 'provision.retry');
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
    attributesChanged: [],
    replicationVia: 'attribute',
    skipped: [],
    limits: { changed: [], notValidated: [] },
    publication: 'present',
    partitioned: 'not-partitioned',
    relayNotify: 'absent',
    preflight,
    dryRun: Boolean(options.dryRun),
  };
  const at = <T>(step: string, body: () => Promise<T>) => atStep({ step, admin: preflight.role.name }, body);
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
      await at(`migration ${migration.id}_${migration.name}`, () => client.query(renderSql(migration.template, config, `sql/migrations/${migration.id}_${migration.name}.sql`)));
      await client.query(`INSERT INTO ${v.migrations} (id, name, checksum) VALUES ($1, $2, $3)`, [migration.id, migration.name, migration.checksum]);
      report.applied.push(`${migration.id}_${migration.name}`);
    }
    report.partitioned = await at('partitioned outbox', () => ensureOutboxPartitioned(client, config));
    report.publication = await at('publication', () => ensurePublication(client, config, migrations));
    const roles = await ensureRoles(client, config, preflight);
    Object.assign(report, roles);
    await at('grants (sql/roles.sql)', () => client.query(rolesSql(config)));
    await at('row policy', () => ensureOutboxPolicies(client, config));
    const limits = await at('outbox limits', () => ensureOutboxLimits(client, config));
    report.limits.changed = limits.changed;
    report.relayNotify = await at('relay notify trigger', () => ensureRelayNotify(client, config));
    for (const skipped of report.skipped) options.log?.warn({ skipped }, `provision: skipped ${skipped}`);
    await client.query(options.dryRun ? 'ROLLBACK' : 'COMMIT');
    // After COMMIT: reading every outbox row must not hold the lock that stops its writers (outbox-limits.ts).
    // Provisioning is committed by now: a failure here leaves the constraints NOT VALID (new rows are
    // checked) for the next run to validate, and is a warning, not an error that would say nothing changed.
    report.limits.notValidated = await validateOutboxLimits(client, config, limits.toValidate, options.dryRun).catch((error: unknown) => {
      options.log?.warn(
        { constraints: limits.toValidate.map((c) => c.name), code: pgCode(error) },
        `provision: could not read the existing outbox rows against the limits (${error instanceof Error ? error.message : String(error)}); they stay NOT VALID until db:provision runs again`,
      );
      return limits.toValidate.map((c) => c.name);
    });
    if (report.limits.notValidated.length > 0) {
      options.log?.warn(
        { constraints: report.limits.notValidated },
        `provision: existing outbox rows break ${report.limits.notValidated.join(', ')}; new rows are checked, the old ones are not until they are deleted and db:provision runs again`,
      );
    }
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
  const found = await client.query<{ pubinsert: boolean; pubupdate: boolean; pubdelete: boolean; pubtruncate: boolean; pubviaroot: boolean }>(
    'SELECT pubinsert, pubupdate, pubdelete, pubtruncate, pubviaroot FROM pg_publication WHERE pubname = $1',
    [outbox.publication],
  );
  if (found.rowCount === 0) {
    const create = migrations.find((m) => m.name === 'publication');
    if (!create) throw new OutboxError('PROVISION_FAILED', 'sql/migrations has no publication migration to recreate the publication from.');
    await client.query(renderSql(create.template, config, `sql/migrations/${create.id}_${create.name}.sql`));
    if (config.outbox.cleanupMode === 'partition') await client.query(`ALTER PUBLICATION ${v.publication} SET (publish_via_partition_root = true)`);
    return 'created';
  }
  let repaired = false;
  const flags = found.rows[0];
  if (!flags?.pubinsert || !flags.pubupdate || flags.pubdelete || flags.pubtruncate) {
    await client.query(`ALTER PUBLICATION ${v.publication} SET (publish = 'insert, update')`);
    repaired = true;
  }
  // A partitioned outbox is published through its root (migration 015), so Debezium sees one table.
  if (config.outbox.cleanupMode === 'partition' && flags?.pubviaroot === false) {
    await client.query(`ALTER PUBLICATION ${v.publication} SET (publish_via_partition_root = true)`);
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
