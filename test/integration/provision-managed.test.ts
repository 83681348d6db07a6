/**
 * db:provision as managed PostgreSQL's admin: no superuser, only CREATEROLE (and REPLICATION), owner of
 * its database (docs/managed-postgres.md). The superuser (postgres) only sets the scene: it creates the
 * admin roles and their databases, as a provider does. Runs on the stack's server and on the version
 * matrix (jest.config.js MATRIX_TESTS); the CREATEROLE + REPLICATION path exists from PostgreSQL 16 on.
 */
import { Client } from 'pg';
import { ROLE_KINDS, type OutboxConfig } from '../../src/config';
import { isOutboxError } from '../../src/errors';
import { provision } from '../../src/provision';
import { rejection } from '../support/expect-error';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, pgConfig, randomIdentifier, withClient, type FreshDatabase } from '../support/stack-env';

const ADMIN_PASSWORD = 'managed-admin-secret-1';
const sql = (text: string) => withClient('postgres', (c) => c.query(text));

/** A fresh database owned by a new admin role with these attributes, and the config that provisions it as that admin. */
async function managedDatabase(attributes: string): Promise<{ db: FreshDatabase; admin: string; config: OutboxConfig }> {
  const admin = randomIdentifier('adm');
  await sql(`CREATE ROLE ${admin} LOGIN ${attributes} PASSWORD '${ADMIN_PASSWORD}'`);
  const db = await freshDatabase('mgd');
  await sql(`ALTER DATABASE ${db.name} OWNER TO ${admin}`);
  const config = testConfig(db.name, { database: { user: admin, password: ADMIN_PASSWORD } });
  return { db, admin, config };
}

async function asRole<T>(config: OutboxConfig, kind: (typeof ROLE_KINDS)[number], body: (c: Client) => Promise<T>): Promise<T> {
  const client = new Client({ ...pgConfig(config.database.database), user: config.roles[kind], password: config.roles[`${kind}Password`] as string });
  await client.connect();
  try {
    return await body(client);
  } finally {
    await client.end();
  }
}

async function cleanUp(db: FreshDatabase, config: OutboxConfig, admin: string): Promise<void> {
  await db.drop();
  await withClient('postgres', async (c) => {
    for (const role of [...ROLE_KINDS.map((kind) => config.roles[kind]), admin]) await c.query(`DROP ROLE IF EXISTS ${c.escapeIdentifier(role)}`).catch(() => {});
  });
}

let versionNum = 0;
beforeAll(async () => {
  versionNum = Number((await sql("SELECT current_setting('server_version_num') AS v")).rows[0].v);
});

describe('db:provision as a CREATEROLE + REPLICATION admin (PostgreSQL 16+)', () => {
  let target: Awaited<ReturnType<typeof managedDatabase>>;
  beforeAll(async () => {
    target = await managedDatabase('CREATEROLE REPLICATION');
  });
  afterAll(() => cleanUp(target.db, target.config, target.admin));

  it('16+: provisions, and a second run changes nothing; before 16: refused naming SUPERUSER', async () => {
    const { config, admin } = target;
    if (versionNum < 160000) {
      const error = await rejection(provision(config));
      expect(isOutboxError(error, 'PREFLIGHT_FAILED')).toBe(true);
      expect((error as Error).message).toContain(`role ${admin} cannot provision`);
      expect((error as Error).message).toContain('SUPERUSER (before PostgreSQL 16');
      return;
    }
    const first = await provision(config);
    expect(first.preflight.path).toBe('createrole-replication');
    expect(first.applied).toHaveLength(16);
    expect(first.rolesCreated.sort()).toEqual(ROLE_KINDS.map((kind) => config.roles[kind]).sort());
    expect(first.passwordsSet.sort()).toEqual(first.rolesCreated);
    expect(first.attributesChanged).toEqual([`${config.roles.cdc}: REPLICATION`]);
    // A plain CREATEROLE admin holds no ADMIN OPTION on pg_monitor: skipped, with the grant to run.
    expect(first.skipped).toHaveLength(1);
    expect(first.skipped[0]).toContain(`GRANT pg_monitor TO ${config.roles.monitor}`);

    const second = await provision(config);
    expect(second.applied).toEqual([]);
    expect(second.rolesCreated).toEqual([]);
    // Each password proven by logging in with it (pg_authid is unreadable): none set again.
    expect(second.passwordsSet).toEqual([]);
    expect(second.attributesChanged).toEqual([]);
    expect(second.publication).toBe('present');
  });

  it('16+: the roles can do their jobs: app writes the outbox, cdc creates a logical slot and reads the outbox, router writes the inbox', async () => {
    if (versionNum < 160000) return;
    const { config } = target;
    await asRole(config, 'app', (c) =>
      c.query("INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type) VALUES ('00000000-0000-4000-8000-0000000000a1', 'order', '1', 'OrderCreated', '\\x7b7d', 'application/json')"),
    );
    const slot = randomIdentifier('mgd_slot');
    await asRole(config, 'cdc', async (c) => {
      const attrs = await c.query('SELECT rolreplication, rolsuper FROM pg_roles WHERE rolname = current_user');
      expect(attrs.rows[0]).toEqual({ rolreplication: true, rolsuper: false });
      await c.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput', true)", [slot]);
      const rows = await c.query('SELECT aggregate_id FROM outbox');
      expect(rows.rows).toEqual([{ aggregate_id: '1' }]);
      await c.query('SELECT pg_drop_replication_slot($1)', [slot]);
    });
    await asRole(config, 'router', (c) => c.query("INSERT INTO inbox (consumer, message_id) VALUES ('c', '00000000-0000-4000-8000-0000000000a1')"));
    await asRole(config, 'router', async (c) => expect((await c.query('SELECT count(*)::int AS n FROM inbox')).rows[0].n).toBe(1));
  });

  it('a role the admin does not administer fails at its own step, not as 25P02', async () => {
    if (versionNum < 160000) return;
    const { config, admin } = target;
    // Made by the superuser, so the admin holds no ADMIN OPTION on it; CREATEDB is an attribute it lacks.
    const other = testConfig(config.database.database, { database: { user: admin, password: ADMIN_PASSWORD } });
    await sql(`CREATE ROLE ${other.roles.relay} LOGIN CREATEDB`);
    try {
      const error = await rejection(provision(other));
      expect(isOutboxError(error, 'PROVISION_FAILED')).toBe(true);
      if (!isOutboxError(error)) return;
      expect(error.details).toMatchObject({ code: '42501', role: other.roles.relay });
      expect(['set password', 'set role attributes']).toContain(error.details.step);
      expect(error.message).toContain(`GRANT ${other.roles.relay} TO ${admin} WITH ADMIN OPTION`);
      expect(error.message).not.toContain('25P02');
    } finally {
      await withClient('postgres', async (c) => {
        for (const role of ROLE_KINDS.map((kind) => other.roles[kind])) await c.query(`DROP ROLE IF EXISTS ${role}`);
      });
    }
  });
});

describe('db:provision refusals', () => {
  it('an admin without CREATEROLE is refused before anything changes, naming what is missing', async () => {
    const target = await managedDatabase('REPLICATION');
    try {
      const error = await rejection(provision(target.config));
      expect(isOutboxError(error, 'PREFLIGHT_FAILED')).toBe(true);
      expect((error as Error).message).toContain(`role ${target.admin} cannot provision: role ${target.admin} is not a superuser and has no CREATEROLE`);
      expect((error as Error).message).toContain('docs/managed-postgres.md');
      const tables = await withClient(target.db.name, (c) => c.query("SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'outbox'"));
      expect(tables.rows[0].n).toBe(0);
    } finally {
      await cleanUp(target.db, target.config, target.admin);
    }
  });
});

/**
 * Amazon RDS / Aurora, simulated: their admin (a member of rds_superuser) has CREATEROLE but not
 * REPLICATION, and holds rds_replication WITH ADMIN OPTION; RDS's patched server lets members of
 * rds_replication replicate. Here rds_replication is a plain NOLOGIN role the superuser creates, so this
 * checks that provisioning takes that path and grants the membership instead of the attribute; it
 * cannot check that the membership lets the CDC role replicate (vanilla PostgreSQL gives it no such
 * right, which the last assertion shows). The role is cluster-wide: it is dropped at the end.
 */
describe('db:provision through rds_replication (simulated RDS)', () => {
  let target: Awaited<ReturnType<typeof managedDatabase>>;
  let madeRdsRole = false;
  beforeAll(async () => {
    const exists = await sql("SELECT 1 FROM pg_roles WHERE rolname = 'rds_replication'");
    if (exists.rowCount === 0) {
      await sql('CREATE ROLE rds_replication NOLOGIN');
      madeRdsRole = true;
    }
    target = await managedDatabase('CREATEROLE');
    await sql(`GRANT rds_replication TO ${target.admin} WITH ADMIN OPTION`);
  });
  afterAll(async () => {
    await cleanUp(target.db, target.config, target.admin);
    if (madeRdsRole) await sql('DROP ROLE IF EXISTS rds_replication');
  });

  it('grants rds_replication to the CDC role instead of REPLICATION, once', async () => {
    const { config } = target;
    const first = await provision(config);
    expect(first.preflight.path).toBe('rds_replication');
    expect(first.replicationVia).toBe('rds_replication');
    const second = await provision(config);
    expect(second.attributesChanged).toEqual([]);
    const cdc = await sql(`SELECT rolreplication, pg_has_role(rolname, 'rds_replication', 'MEMBER') AS member FROM pg_roles WHERE rolname = '${config.roles.cdc}'`);
    expect(cdc.rows[0]).toEqual({ rolreplication: false, member: true });
    await asRole(config, 'cdc', async (c) => {
      await expect(c.query("SELECT pg_create_logical_replication_slot('not_on_vanilla', 'pgoutput', true)")).rejects.toMatchObject({ code: '42501' });
    });
  });
});
