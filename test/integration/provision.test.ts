import { Client } from 'pg';
import { ROLE_KINDS, type OutboxConfig } from '../../src/config';
import { isOutboxError } from '../../src/errors';
import { createOutboxWriter, type OutboxEvent, type PayloadEncoder } from '../../src/producer';
import { loadMigrations, provision } from '../../src/provision';
import { rejection } from '../support/expect-error';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, pgConfig, randomIdentifier, withClient, type FreshDatabase } from '../support/stack-env';
import { startTcpProxy } from '../support/tcp-proxy';
import { until } from '../support/until';

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
    for (const role of ROLE_KINDS.map((kind) => config.roles[kind])) {
      await c.query(`DROP ROLE IF EXISTS ${c.escapeIdentifier(role)}`).catch(() => {});
    }
  });

/** Every shipped migration as the report names it: `<id>_<name>`. */
const MIGRATIONS = loadMigrations().map((m) => `${m.id}_${m.name}`);

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
    expect(MIGRATIONS).toHaveLength(16);
    expect(MIGRATIONS.slice(0, 7)).toEqual(['1_outbox', '2_inbox', '3_heartbeat', '4_publication', '5_parked', '6_relay_cleanup_index', '7_outbox_order']);
    expect(first.applied).toEqual(MIGRATIONS);
    expect(MIGRATIONS.slice(7)).toEqual(['8_outbox_limits', '9_parked_head_index', '10_inbox_retention', '11_outbox_cleanup', '12_outbox_cleanup_slot_identity', '13_inbox_text_ids', '14_topic_partitions', '15_outbox_partitions', '16_inbox_partitions']);
    expect(first.rolesCreated.sort()).toEqual(ROLE_KINDS.map((kind) => config.roles[kind]).sort());

    const second = await provision(config);
    expect(second.applied).toEqual([]);
    expect(second.alreadyApplied).toEqual(MIGRATIONS);
    expect(second.rolesCreated).toEqual([]);
    expect(second.passwordsSet).toEqual([]);
    expect(second.limits).toEqual({ changed: [], notValidated: [] });

    await withClient(db.name, async (c) => {
      const cols = await c.query("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'outbox' ORDER BY ordinal_position");
      expect(cols.rows.map((r) => r.column_name)).toEqual([
        'id', 'aggregate_type', 'aggregate_id', 'event_type', 'payload', 'content_type', 'traceparent', 'headers', 'created_at', 'published_at', 'attempts', 'seq', 'tx_id',
      ]);
      expect(cols.rows.find((r) => r.column_name === 'payload')?.data_type).toBe('bytea');
      const pub = await c.query(
        'SELECT p.pubinsert, p.pubupdate, p.pubdelete, pg_get_userbyid(p.pubowner) AS owner, array_agg(t.tablename::text ORDER BY t.tablename) AS tables FROM pg_publication p JOIN pg_publication_tables t USING (pubname) WHERE p.pubname = $1 GROUP BY 1, 2, 3, 4',
        [config.outbox.publication],
      );
      expect(pub.rows[0]).toEqual({ pubinsert: true, pubupdate: true, pubdelete: false, owner: config.database.user, tables: ['outbox', 'outbox_heartbeat'] });
    });
  });

  it('accepts a database provisioned under the whole-text checksums of 0.1.0 and records the new ones; an edited migration is still refused', async () => {
    await provision(config);
    const table = `${config.outbox.schema}.${config.outbox.migrationsTable}`;
    const [m1, , m3] = loadMigrations();
    const checksums = () => withClient(db.name, async (c) => (await c.query(`SELECT id, checksum FROM ${table} WHERE id IN (1, 3) ORDER BY id`)).rows);
    // As 0.1.0 recorded them: 001's whole text before its comment was corrected, 003's whole text.
    await withClient(db.name, (c) => c.query(`UPDATE ${table} SET checksum = CASE id WHEN 1 THEN 'd929ddbda140d8c2' ELSE $1 END WHERE id IN (1, 3)`, [m3?.formerChecksums[0]]));
    const report = await provision(config);
    expect(report.applied).toEqual([]);
    expect(await checksums()).toEqual([
      { id: 1, checksum: m1?.checksum },
      { id: 3, checksum: m3?.checksum },
    ]);

    await withClient(db.name, (c) => c.query(`UPDATE ${table} SET checksum = '0123456789abcdef' WHERE id = 3`));
    const refused = await rejection(provision(config));
    expect(isOutboxError(refused) && refused.code).toBe('MIGRATION_CHANGED');
    await withClient(db.name, (c) => c.query(`UPDATE ${table} SET checksum = $1 WHERE id = 3`, [m3?.checksum]));
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
      expect(reports.flatMap((r) => r.applied).sort()).toEqual([...MIGRATIONS].sort());
      const count = await withClient(other.name, (c) => c.query('SELECT count(*)::int AS n FROM outbox_migrations'));
      expect(count.rows[0].n).toBe(MIGRATIONS.length);
    } finally {
      await other.drop();
    }
  });

  it('a dry run reports the migrations and leaves nothing behind', async () => {
    const other = await freshDatabase('prov_dry');
    try {
      const report = await provision(testConfig(other.name, { roles: config.roles }), { dryRun: true });
      expect(report.applied).toEqual(MIGRATIONS);
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

  describe('outbox limits (rows the application inserts by plain SQL)', () => {
    const KIB = 1024;
    const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    /** One outbox row's columns; `payloadBytes` zero bytes of payload. */
    interface Row {
      aggregateType: string;
      aggregateId: string;
      payloadBytes: number;
      headers: string | null;
      traceparent: string | null;
    }
    const valid: Row = { aggregateType: 'order', aggregateId: '1', payloadBytes: 2, headers: null, traceparent: null };
    const insert = (c: Client, row: Row) =>
      c.query(
        'INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type, traceparent, headers) ' +
          "VALUES (gen_random_uuid(), $1, $2, 'OrderCreated', $3, 'application/json', $4, $5)",
        [row.aggregateType, row.aggregateId, Buffer.alloc(row.payloadBytes), row.traceparent, row.headers],
      );
    const asApp = <T>(body: (c: Client) => Promise<T>) => asRole(config, config.roles.app, config.roles.appPassword as string, body);
    const headersOf = (bytes: number) => JSON.stringify({ h: 'x'.repeat(bytes - '{"h":""}'.length) });

    afterAll(async () => {
      await provision(config); // back to the default limits for the tests after these
      await withClient(db.name, (c) => c.query('DELETE FROM outbox'));
    });

    it.each<[string, string, Partial<Row>]>([
      ['a 2 MB payload', 'outbox_payload_size', { payloadBytes: 2 * 1024 * KIB }],
      ['65 KiB of headers', 'outbox_headers_size', { headers: headersOf(65 * KIB) }],
      ['an aggregate_type of 300 characters (topic name over 249)', 'outbox_aggregate_type_topic', { aggregateType: 'a'.repeat(300) }],
      ["an aggregate_type with '/'", 'outbox_aggregate_type_topic', { aggregateType: 'order/items' }],
      ['an empty aggregate_type', 'outbox_aggregate_type_topic', { aggregateType: '' }],
      ['an aggregate_id over 4096 bytes', 'outbox_aggregate_id_size', { aggregateId: 'é'.repeat(2049) }],
      ['a traceparent that is not W3C', 'outbox_traceparent_format', { traceparent: 'x'.repeat(10 * KIB) }],
    ])('refuses %s at INSERT as the application role, SQLSTATE 23514 naming %s', async (_what, constraint, patch) => {
      await asApp(async (c) => {
        await expect(insert(c, { ...valid, ...patch })).rejects.toMatchObject({ code: '23514', constraint });
      });
    });

    it('accepts a row at every limit, and one with only the documented columns', async () => {
      await asApp(async (c) => {
        const edge = { aggregateType: 'a'.repeat(236), aggregateId: 'é'.repeat(2048), payloadBytes: 900 * KIB, headers: headersOf(64 * KIB), traceparent: TRACEPARENT };
        await expect(insert(c, edge)).resolves.toMatchObject({ rowCount: 1 });
        await expect(insert(c, valid)).resolves.toMatchObject({ rowCount: 1 });
      });
      // 001's unnamed aggregate_type check is gone (008): the named limits say what a refused row broke.
      const checks = await withClient(db.name, (c) => c.query<{ conname: string }>("SELECT conname FROM pg_constraint WHERE conrelid = 'outbox'::regclass AND contype = 'c' ORDER BY conname"));
      expect(checks.rows.map((r) => r.conname)).toEqual([
        'outbox_aggregate_id_size',
        'outbox_aggregate_type_topic',
        'outbox_content_type_check',
        'outbox_event_type_check',
        'outbox_headers_size',
        'outbox_payload_size',
        'outbox_traceparent_format',
      ]);
    });

    it('the writer and the database give the same answer for the same event', async () => {
      const sized: PayloadEncoder = { encode: async (_a, _t, payload) => Buffer.alloc((payload as { bytes: number }).bytes) };
      const writer = createOutboxWriter({ outbox: config.outbox, codec: sized, contentType: 'application/json' });
      const max = config.outbox.maxPayloadBytes;
      const cases: Array<[string, Partial<Row>, 'accepted' | 'refused']> = [
        ['aggregate_type of 236', { aggregateType: 'a'.repeat(236) }, 'accepted'],
        ['aggregate_type of 237', { aggregateType: 'a'.repeat(237) }, 'refused'],
        ['aggregate_type with a space', { aggregateType: 'order items' }, 'refused'],
        ['aggregate_id of 4096 bytes', { aggregateId: 'a'.repeat(4096) }, 'accepted'],
        ['aggregate_id of 2049 two-byte characters', { aggregateId: 'é'.repeat(2049) }, 'refused'],
        ['empty aggregate_id', { aggregateId: '' }, 'refused'],
        ['payload at the limit', { payloadBytes: max }, 'accepted'],
        ['payload one byte over', { payloadBytes: max + 1 }, 'refused'],
        ['headers of 64 KiB', { headers: headersOf(64 * KIB) }, 'accepted'],
        ['headers one byte over', { headers: headersOf(64 * KIB + 1) }, 'refused'],
        ['W3C traceparent', { traceparent: TRACEPARENT }, 'accepted'],
        ['upper-case traceparent', { traceparent: TRACEPARENT.toUpperCase() }, 'refused'],
        // The database's checks are written without bounded repetition (src/producer/limits.ts): the
        // cases a length test and dash positions must still tell apart.
        ['aggregate_type with a trailing newline', { aggregateType: 'order\n' }, 'refused'],
        ['aggregate_type with a non-ASCII letter', { aggregateType: 'ordér' }, 'refused'],
        ['traceparent with a trailing newline', { traceparent: `${TRACEPARENT}\n` }, 'refused'],
        ['traceparent with its first dash one place later', { traceparent: `${TRACEPARENT.slice(0, 2)}0-${TRACEPARENT.slice(4)}` }, 'refused'],
        ['traceparent with a fourth dash in place of a hex digit', { traceparent: `${TRACEPARENT.slice(0, 10)}-${TRACEPARENT.slice(11)}` }, 'refused'],
        ['traceparent one hex digit short', { traceparent: TRACEPARENT.slice(0, -1) }, 'refused'],
        ['traceparent one hex digit long', { traceparent: `${TRACEPARENT}0` }, 'refused'],
        ['traceparent with a non-hex letter', { traceparent: `${TRACEPARENT.slice(0, 5)}g${TRACEPARENT.slice(6)}` }, 'refused'],
        ['traceparent of other version and flags', { traceparent: `ff${TRACEPARENT.slice(2, -2)}ff` }, 'accepted'],
      ];
      const verdicts: Array<{ what: string; writer: string; database: string }> = [];
      for (const [what, patch] of cases) {
        const row = { ...valid, ...patch };
        const event: OutboxEvent = {
          aggregateType: row.aggregateType,
          aggregateId: row.aggregateId,
          type: 'OrderCreated',
          payload: { bytes: row.payloadBytes },
          ...(row.headers ? { headers: JSON.parse(row.headers) as Record<string, string> } : {}),
          ...(row.traceparent ? { traceparent: row.traceparent } : {}),
        };
        const writerSays = await writer.prepareInsert([event]).then(
          () => 'accepted',
          (e: unknown) => (isOutboxError(e) ? 'refused' : String(e)),
        );
        const database = await asApp((c) => insert(c, row)).then(
          () => 'accepted',
          (e: { code?: string }) => (e.code === '23514' ? 'refused' : String(e)),
        );
        verdicts.push({ what, writer: writerSays, database });
      }
      expect(verdicts).toEqual(cases.map(([what, , expected]) => ({ what, writer: expected, database: expected })));
    });

    it('re-provisioning with another outbox.maxPayloadBytes replaces the payload constraint, and only it', async () => {
      await withClient(db.name, (c) => c.query('DELETE FROM outbox')); // rows of the tests above are over 1000 bytes
      const small = testConfig(db.name, { roles: config.roles, outbox: { maxPayloadBytes: 1000 } });
      const report = await provision(small);
      expect(report.limits).toEqual({ changed: ['outbox_payload_size'], notValidated: [] });
      await asApp(async (c) => {
        await expect(insert(c, { ...valid, payloadBytes: 1001 })).rejects.toMatchObject({ code: '23514', constraint: 'outbox_payload_size' });
        await expect(insert(c, { ...valid, payloadBytes: 1000 })).resolves.toMatchObject({ rowCount: 1 });
        // A writer configured for more than the database allows: the refusal names the constraint and the fix.
        const writer = createOutboxWriter({ outbox: config.outbox, codec: { encode: async () => Buffer.alloc(2000) }, contentType: 'application/json' });
        await c.query('BEGIN');
        const error = await rejection(writer.writeEvent(c, { aggregateType: 'order', aggregateId: '1', type: 'OrderCreated', payload: {} }));
        await c.query('ROLLBACK');
        expect(error.code).toBe('PAYLOAD_TOO_LARGE');
        expect(error.message).toContain('outbox_payload_size');
        expect(error.message).toContain('run db:provision with the same outbox.maxPayloadBytes');
      });
      expect((await provision(small)).limits).toEqual({ changed: [], notValidated: [] });
      expect((await provision(config)).limits.changed).toEqual(['outbox_payload_size']);
    });

    it('existing rows over a new limit leave it NOT VALID (new rows are still checked) until they are gone', async () => {
      await withClient(db.name, (c) => c.query('DELETE FROM outbox'));
      await asApp((c) => insert(c, { ...valid, aggregateId: 'legacy', payloadBytes: 5000 }));
      const small = testConfig(db.name, { roles: config.roles, outbox: { maxPayloadBytes: 1000 } });
      expect((await provision(small)).limits).toEqual({ changed: ['outbox_payload_size'], notValidated: ['outbox_payload_size'] });
      await asApp((c) => expect(insert(c, { ...valid, payloadBytes: 5000 })).rejects.toMatchObject({ code: '23514', constraint: 'outbox_payload_size' }));
      await withClient(db.name, (c) => c.query("DELETE FROM outbox WHERE aggregate_id = 'legacy'"));
      expect((await provision(small)).limits).toEqual({ changed: [], notValidated: [] });
      const validated = await withClient(db.name, (c) => c.query("SELECT convalidated FROM pg_constraint WHERE conrelid = 'outbox'::regclass AND conname = 'outbox_payload_size'"));
      expect(validated.rows).toEqual([{ convalidated: true }]);
      await provision(config);
    });

    it('validates a replaced limit after COMMIT: writers insert while the existing rows are read', async () => {
      await withClient(db.name, async (c) => {
        await c.query('DELETE FROM outbox');
        // An outbox provisioned by an earlier release: the aggregate_type rule in its old text.
        await c.query('ALTER TABLE outbox DROP CONSTRAINT outbox_aggregate_type_topic');
        await c.query("ALTER TABLE outbox ADD CONSTRAINT outbox_aggregate_type_topic CHECK (aggregate_type ~ '^[A-Za-z0-9._-]{1,236}$')");
      });
      await asApp((c) => insert(c, valid));
      // reader holds ACCESS SHARE, so provisioning queues for its ACCESS EXCLUSIVE; holder then queues behind
      // provisioning for SHARE UPDATE EXCLUSIVE and gets it the moment provisioning's transaction ends,
      // which makes a VALIDATE after that transaction wait where the test can see it.
      const [reader, holder] = [new Client(pgConfig(db.name)), new Client(pgConfig(db.name))];
      await Promise.all([reader.connect(), holder.connect()]);
      try {
        const waiting = async () =>
          (
            await withClient(db.name, (c) =>
              c.query<{ pid: number; mode: string }>("SELECT pid, mode FROM pg_locks WHERE relation = 'outbox'::regclass AND NOT granted ORDER BY pid"),
            )
          ).rows;
        await reader.query('BEGIN');
        await reader.query('SELECT count(*) FROM outbox');
        let settled = false;
        const provisioning = provision(config).finally(() => (settled = true));
        const [provisioner] = await until('provisioning waits for its lock on the outbox', waiting, (rows) => rows.length === 1);
        await holder.query('BEGIN');
        const holderPid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        const held = holder.query('LOCK TABLE outbox IN SHARE UPDATE EXCLUSIVE MODE');
        await until('the holder queues behind provisioning', waiting, (rows) => rows.some((r) => r.pid === holderPid));
        await reader.query('COMMIT');
        await held;
        const validating = await until('provisioning waits to VALIDATE, its transaction committed', waiting, (rows) => settled || rows.length > 0);
        expect({ settled, validating }).toEqual({ settled: false, validating: [{ pid: provisioner!.pid, mode: 'ShareUpdateExclusiveLock' }] });
        // Meanwhile a writer inserts (a lock wait would fail it after 2 s instead of hanging).
        await asApp(async (c) => {
          await c.query("SET lock_timeout = '2s'");
          await expect(insert(c, { ...valid, aggregateId: 'during-validate' })).resolves.toMatchObject({ rowCount: 1 });
        });
        await holder.query('COMMIT');
        expect((await provisioning).limits).toEqual({ changed: ['outbox_aggregate_type_topic'], notValidated: [] });
        const validated = await withClient(db.name, (c) => c.query("SELECT convalidated FROM pg_constraint WHERE conrelid = 'outbox'::regclass AND conname = 'outbox_aggregate_type_topic'"));
        expect(validated.rows).toEqual([{ convalidated: true }]);
      } finally {
        await Promise.all([reader.end(), holder.end()]);
      }
    });

    it('a dry run reports the limits existing rows would break, and changes nothing', async () => {
      await withClient(db.name, (c) => c.query('DELETE FROM outbox'));
      await asApp((c) => insert(c, { ...valid, aggregateId: 'legacy', payloadBytes: 5000 }));
      const small = testConfig(db.name, { roles: config.roles, outbox: { maxPayloadBytes: 1000 } });
      expect((await provision(small, { dryRun: true })).limits).toEqual({ changed: ['outbox_payload_size'], notValidated: ['outbox_payload_size'] });
      const kept = await withClient(db.name, (c) => c.query("SELECT pg_get_constraintdef(oid) AS def, convalidated FROM pg_constraint WHERE conrelid = 'outbox'::regclass AND conname = 'outbox_payload_size'"));
      expect(kept.rows).toEqual([{ def: expect.stringContaining(String(config.outbox.maxPayloadBytes)), convalidated: true }]);
      await withClient(db.name, (c) => c.query('DELETE FROM outbox'));
    });

    it('puts back a limit constraint dropped or replaced by hand', async () => {
      await withClient(db.name, async (c) => {
        await c.query('ALTER TABLE outbox DROP CONSTRAINT outbox_headers_size');
        await c.query('ALTER TABLE outbox DROP CONSTRAINT outbox_aggregate_type_topic');
        await c.query("ALTER TABLE outbox ADD CONSTRAINT outbox_aggregate_type_topic CHECK (aggregate_type <> '')");
      });
      expect((await provision(config)).limits.changed.sort()).toEqual(['outbox_aggregate_type_topic', 'outbox_headers_size']);
      await asApp((c) => expect(insert(c, { ...valid, aggregateType: 'a/b' })).rejects.toMatchObject({ code: '23514', constraint: 'outbox_aggregate_type_topic' }));
    });
  });

  describe('role passwords off the local stack', () => {
    // The same PostgreSQL through a proxy on another port: by isLocalStackDatabase not the local stack.
    let proxy: Awaited<ReturnType<typeof startTcpProxy>>;
    let remoteDb: FreshDatabase;
    const suffix = randomIdentifier('p').slice(-8);
    const names = { cdc: `cdc_${suffix}`, app: `app_${suffix}`, monitor: `mon_${suffix}`, router: `rt_${suffix}`, relay: `rl_${suffix}` };
    const remote = (roles: Record<string, string> = {}) =>
      testConfig(remoteDb.name, { database: { host: '127.0.0.1', port: proxy.port }, roles: { ...names, ...roles } });

    beforeAll(async () => {
      proxy = await startTcpProxy(Number(pgConfig().port));
      remoteDb = await freshDatabase('prov_remote');
    });
    afterAll(async () => {
      await proxy.close();
      await remoteDb.drop();
      await withClient('postgres', async (c) => {
        for (const role of Object.values(names)) await c.query(`DROP ROLE IF EXISTS ${c.escapeIdentifier(role)}`).catch(() => {});
      });
    });

    it('refuses to create roles without passwords, naming each variable to set, and changes nothing', async () => {
      const error = await rejection(provision(remote({ appPassword: 'app-secret-1' })));
      expect(error.code).toBe('ROLE_PASSWORD_REQUIRED');
      for (const variable of ['OUTBOX_CDC_PASSWORD', 'OUTBOX_MONITOR_PASSWORD', 'OUTBOX_ROUTER_PASSWORD', 'OUTBOX_RELAY_PASSWORD']) expect(error.message).toContain(variable);
      expect(error.message).not.toContain('OUTBOX_APP_PASSWORD');
      const left = await withClient(remoteDb.name, async (c) => ({
        roles: (await c.query('SELECT count(*)::int AS n FROM pg_roles WHERE rolname = ANY($1)', [Object.values(names)])).rows[0].n,
        tables: (await c.query("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'")).rows[0].n,
      }));
      expect(left).toEqual({ roles: 0, tables: 0 });
    });

    it('sets explicit passwords, and leaves an existing role’s password alone when none is given', async () => {
      const given = { cdcPassword: 'cdc-secret-1', appPassword: 'app-secret-1', monitorPassword: 'mon-secret-1', routerPassword: 'rt-secret-1', relayPassword: 'rl-secret-1' };
      const first = await provision(remote(given));
      expect(first.passwordsSet.sort()).toEqual(Object.values(names).sort());
      const second = await provision(remote());
      expect(second.passwordsSet).toEqual([]);
      expect(second.passwordsKept.sort()).toEqual(Object.values(names).sort());
      // The published development password never reached the role; the explicit one still logs in.
      const onRemoteDb = { ...config, database: { ...config.database, database: remoteDb.name } };
      await expect(asRole(onRemoteDb, names.app, 'outbox-app-local', async () => {})).rejects.toMatchObject({ code: '28P01' });
      await asRole(onRemoteDb, names.router, 'rt-secret-1', (c) => c.query("INSERT INTO inbox (consumer, message_id) VALUES ('c', gen_random_uuid())"));
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
      expect(report.applied).toEqual(MIGRATIONS);
      await withClient(other.name, async (c) => {
        const t = await c.query("SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema LIKE 'we%' ORDER BY table_name");
        expect(t.rows.map((r) => r.table_name)).toEqual(['hb$$', 'in box', 'in box_parked', 'out"box', 'out"box_cleanup_marks', 'out"box_cleanup_registrations', 'out"box_cleanup_slots', 'out"box_topic_partitions', 'outbox_migrations']);
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
        // connecting as the monitoring role; provisioning that same role would be CONFIG_INVALID before preflight
        roles: { ...config.roles, monitor: `${config.roles.monitor}_2` },
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
