import { Client } from 'pg';
import type { OutboxConfig } from '../../src/config';
import { isOutboxError } from '../../src/errors';
import { provision } from '../../src/provision';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, pgConfig, withClient, type FreshDatabase } from '../support/stack-env';

async function asRole<T>(config: OutboxConfig, role: string, password: string, body: (c: Client) => Promise<T>): Promise<T> {
  const client = new Client({ ...pgConfig(config.database.database), user: role, password });
  await client.connect();
  try {
    return await body(client);
  } finally {
    await client.end();
  }
}

const dropRoles = (config: OutboxConfig) =>
  withClient('postgres', async (c) => {
    for (const role of [config.roles.cdc, config.roles.app, config.roles.monitor]) {
      await c.query(`DROP ROLE IF EXISTS ${c.escapeIdentifier(role)}`).catch(() => {});
    }
  });

describe('db:provision', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;

  beforeAll(async () => {
    db = await freshDatabase('prov');
    config = testConfig(db.name);
  });

  afterAll(async () => {
    await db.drop();
    await dropRoles(config);
  });

  it('applies the migrations once; a second run is a no-op', async () => {
    const first = await provision(config);
    // 7 and 8 belong to other changes; 9 is the parked-key head index.
    expect(first.applied).toHaveLength(9);
    expect(first.applied.slice(0, 6)).toEqual(['1_outbox', '2_inbox', '3_heartbeat', '4_publication', '5_parked', '6_relay_cleanup_index']);
    expect(first.applied[8]).toBe('9_parked_head_index');
    expect(first.rolesCreated.sort()).toEqual([config.roles.app, config.roles.cdc, config.roles.monitor].sort());

    const second = await provision(config);
    expect(second.applied).toEqual([]);
    expect(second.alreadyApplied).toHaveLength(9);
    expect(second.rolesCreated).toEqual([]);
    expect(second.passwordsSet).toEqual([]);

    await withClient(db.name, async (c) => {
      const cols = await c.query("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'outbox' ORDER BY ordinal_position");
      expect(cols.rows.map((r) => r.column_name)).toEqual([
        'id', 'aggregate_type', 'aggregate_id', 'event_type', 'payload', 'content_type', 'traceparent', 'headers', 'created_at', 'published_at', 'attempts',
      ]);
      expect(cols.rows.find((r) => r.column_name === 'payload')?.data_type).toBe('bytea');
      const pub = await c.query(
        'SELECT p.pubinsert, p.pubupdate, p.pubdelete, pg_get_userbyid(p.pubowner) AS owner, array_agg(t.tablename::text ORDER BY t.tablename) AS tables FROM pg_publication p JOIN pg_publication_tables t USING (pubname) WHERE p.pubname = $1 GROUP BY 1, 2, 3, 4',
        [config.outbox.publication],
      );
      expect(pub.rows[0]).toEqual({ pubinsert: true, pubupdate: true, pubdelete: false, owner: 'postgres', tables: ['outbox', 'outbox_heartbeat'] });
    });
  });

  it('recreates a dropped publication and repairs a drifted one (connector:delete --drop-slot drops it)', async () => {
    await withClient(db.name, (c) => c.query(`DROP PUBLICATION ${c.escapeIdentifier(config.outbox.publication)}`));
    expect((await provision(config)).publication).toBe('created');

    await withClient(db.name, async (c) => {
      await c.query('CREATE TABLE stray (id int PRIMARY KEY)');
      await c.query(`ALTER PUBLICATION ${c.escapeIdentifier(config.outbox.publication)} ADD TABLE stray`);
      await c.query(`ALTER PUBLICATION ${c.escapeIdentifier(config.outbox.publication)} SET (publish = 'insert, update, delete')`);
    });
    expect((await provision(config)).publication).toBe('repaired');
    const pub = await withClient(db.name, (c) =>
      c.query('SELECT p.pubdelete, array_agg(t.tablename::text ORDER BY t.tablename) AS tables FROM pg_publication p JOIN pg_publication_tables t USING (pubname) WHERE p.pubname = $1 GROUP BY 1', [
        config.outbox.publication,
      ]),
    );
    expect(pub.rows[0]).toEqual({ pubdelete: false, tables: ['outbox', 'outbox_heartbeat'] });
    expect((await provision(config)).publication).toBe('present');
  });

  it('lets two concurrent runs race without errors or double application', async () => {
    const other = await freshDatabase('prov_race');
    const raceConfig = testConfig(other.name, { roles: config.roles });
    try {
      const reports = await Promise.all([provision(raceConfig), provision(raceConfig), provision(raceConfig)]);
      // each migration applied by exactly one of the runs
      const applied = reports.flatMap((r) => r.applied);
      expect(applied).toHaveLength(9);
      expect(new Set(applied).size).toBe(9);
      const count = await withClient(other.name, (c) => c.query('SELECT count(*)::int AS n FROM outbox_migrations'));
      expect(count.rows[0].n).toBe(9);
    } finally {
      await other.drop();
    }
  });

  it('a dry run reports the migrations and leaves nothing behind', async () => {
    const other = await freshDatabase('prov_dry');
    try {
      const report = await provision(testConfig(other.name, { roles: config.roles }), { dryRun: true });
      expect(report.applied).toHaveLength(9);
      const tables = await withClient(other.name, (c) => c.query("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'"));
      expect(tables.rows[0].n).toBe(0);
    } finally {
      await other.drop();
    }
  });

  describe('least privilege', () => {
    beforeAll(async () => {
      await withClient(db.name, (c) => c.query('CREATE TABLE orders (id int PRIMARY KEY, note text)'));
    });

    it('the CDC role can replicate and read the outbox but cannot write business tables or the outbox', async () => {
      const { cdc, cdcPassword } = config.roles;
      await asRole(config, cdc, cdcPassword as string, async (c) => {
        const attrs = await c.query('SELECT rolreplication, rolsuper FROM pg_roles WHERE rolname = current_user');
        expect(attrs.rows[0]).toEqual({ rolreplication: true, rolsuper: false });
        await expect(c.query('SELECT count(*) FROM outbox')).resolves.toBeDefined();
        await expect(c.query("INSERT INTO orders VALUES (1, 'x')")).rejects.toMatchObject({ code: '42501' });
        await expect(c.query('SELECT * FROM orders')).rejects.toMatchObject({ code: '42501' });
        await expect(c.query('DELETE FROM outbox')).rejects.toMatchObject({ code: '42501' });
        await expect(c.query('SELECT * FROM inbox')).rejects.toMatchObject({ code: '42501' });
      });
    });

    it('the application role can insert into the outbox (and delete its own insert) but not read payloads', async () => {
      const { app, appPassword } = config.roles;
      await asRole(config, app, appPassword as string, async (c) => {
        await c.query('BEGIN');
        await c.query(
          "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type) VALUES ('00000000-0000-4000-8000-000000000001', 'order', '1', 'OrderCreated', '\\x7b7d', 'application/json')",
        );
        await c.query("DELETE FROM outbox WHERE id = '00000000-0000-4000-8000-000000000001'");
        await c.query('COMMIT');
        await expect(c.query('SELECT payload FROM outbox')).rejects.toMatchObject({ code: '42501' });
        await expect(c.query('UPDATE outbox SET attempts = 1')).rejects.toMatchObject({ code: '42501' });
      });
    });

    it('the monitoring role reads replication views and nothing of the data', async () => {
      const { monitor, monitorPassword } = config.roles;
      await asRole(config, monitor, monitorPassword as string, async (c) => {
        await expect(c.query('SELECT slot_name, pg_current_wal_lsn() FROM pg_replication_slots')).resolves.toBeDefined();
        await expect(c.query('SELECT * FROM outbox')).rejects.toMatchObject({ code: '42501' });
      });
    });
  });

  it('escapes hostile schema, table and publication names', async () => {
    const other = await freshDatabase('prov_hostile');
    const hostile = testConfig(other.name, {
      roles: config.roles,
      outbox: { schema: 'we"ird; DROP SCHEMA public --', table: 'out"box', inboxTable: 'in box', heartbeatTable: 'hb$$', publication: 'pub"; --' },
    });
    try {
      const report = await provision(hostile);
      expect(report.applied).toHaveLength(9);
      await withClient(other.name, async (c) => {
        const t = await c.query("SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema LIKE 'we%' ORDER BY table_name");
        expect(t.rows.map((r) => r.table_name)).toEqual(['hb$$', 'in box', 'in box_parked', 'out"box', 'outbox_migrations']);
        const pub = await c.query('SELECT 1 FROM pg_publication WHERE pubname = $1', ['pub"; --']);
        expect(pub.rowCount).toBe(1);
        const publicSchema = await c.query("SELECT 1 FROM pg_namespace WHERE nspname = 'public'");
        expect(publicSchema.rowCount).toBe(1);
      });
    } finally {
      await other.drop();
    }
  });

  it('fails preflight with every problem named when the role lacks rights, changing nothing', async () => {
    const other = await freshDatabase('prov_weak');
    try {
      const weak = testConfig(other.name, {
        roles: config.roles,
        database: { user: config.roles.monitor, password: config.roles.monitorPassword },
      });
      const error = await provision(weak).catch((e: unknown) => e);
      expect(isOutboxError(error, 'PREFLIGHT_FAILED')).toBe(true);
      expect((error as Error).message).toContain(`role ${config.roles.monitor} cannot provision`);
      const tables = await withClient(other.name, (c) => c.query("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'"));
      expect(tables.rows[0].n).toBe(0);
    } finally {
      await other.drop();
    }
  });
});
