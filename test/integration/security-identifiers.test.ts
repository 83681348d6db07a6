/**
 * Hostile identifiers end to end: schema, table, inbox, heartbeat, migrations, publication and role
 * names with quotes, semicolons, comment markers, spaces, upper case, backslashes and non-ASCII
 * letters. Provisioning (migrations, publication, roles, grants, row policy), the writer (as the
 * application role, with and without deleteAfterInsert), the inbox, the payload size limit and the
 * connector (validated by Kafka Connect, deployed, one event routed to Kafka) must all work on them,
 * and nothing of a name may escape into the SQL. Fresh database; connector, slot, topics and roles
 * are removed in afterAll.
 */
import { Client } from 'pg';
import type { OutboxConfig } from '../../src/config';
import { buildConnectorConfig, createConnectClient, deleteConnector, deployConnector, heartbeatQuery } from '../../src/connector';
import { createPool, qualified } from '../../src/db';
import { provision } from '../../src/provision';
import { createOutboxWriter, type PayloadEncoder } from '../../src/producer';
import { applyOnce } from '../../src/router/inbox-transaction';
import { collect } from '../support/consume';
import { rejection, thrown } from '../support/expect-error';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, pgConfig, randomIdentifier, stackUrls, testKafka, withClient, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(180_000);

const id = randomIdentifier('hid').slice(-12);
const NAMES = {
  schema: `Outbox "Sch"; DROP SCHEMA public CASCADE; -- ${id}`,
  table: `Évén ts "T"'; --`,
  inboxTable: `In box'); DROP TABLE x; --`,
  heartbeatTable: `HB "beat" $$ x`,
  migrationsTable: 'Mïg\\rations',
  publication: `Pub "p"; DROP PUBLICATION x; ${id}`,
};
const ROLES = { cdc: `Cdc "r" ${id}`, app: `App "R"; ${id}`, monitor: `Mön -- ${id}`, router: `Röuter "x"; ${id}`, relay: `Relay'); -- ${id}` };

let db: FreshDatabase;
let config: OutboxConfig;
/** The same tables behind a publication Debezium can stream (see debeziumNameProblems). */
let streamable: OutboxConfig;
const jsonEncoder: PayloadEncoder = { encode: async (_a, _t, payload) => Buffer.from(JSON.stringify(payload)) };

const admin = <T>(body: (c: Client) => Promise<T>) => withClient(db.name, body);
const outboxTable = () => qualified(NAMES.schema, NAMES.table);

async function asApp<T>(body: (c: Client) => Promise<T>): Promise<T> {
  const client = new Client({ ...pgConfig(db.name), user: ROLES.app, password: config.roles.appPassword });
  await client.connect();
  try {
    return await body(client);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  db = await freshDatabase('sec_ident');
  const connector = {
    name: `sec-ident-${id}`,
    slotName: `sec_ident_${id}`,
    topicPrefix: `sec-${id}`,
    topicReplacement: `sec-${id}.event.\${routedByValue}`,
    heartbeatIntervalMs: 1_000,
    deployTimeoutMs: 90_000,
  };
  const connect = { url: process.env.OUTBOX_CONNECT_URL || stackUrls.connect };
  config = testConfig(db.name, { outbox: { ...NAMES, maxPayloadBytes: 2048 }, roles: ROLES, connect, connector });
  streamable = testConfig(db.name, { outbox: { ...NAMES, publication: `pub_${id}` }, roles: ROLES, connect, connector });
});

afterAll(async () => {
  await deleteConnector(streamable, { dropSlot: true, force: true, timeoutMs: 30_000 }).catch((e) => process.stderr.write(`cleanup: ${e}\n`));
  await db.drop();
  await withClient('postgres', async (c) => {
    for (const role of Object.values(ROLES)) await c.query(`DROP ROLE IF EXISTS ${c.escapeIdentifier(role)}`).catch(() => {});
  });
  const kafkaAdmin = testKafka().admin();
  await kafkaAdmin.connect();
  const topics = (await kafkaAdmin.listTopics()).filter((t) => t.includes(id));
  if (topics.length) await kafkaAdmin.deleteTopics({ topics }).catch(() => {});
  await kafkaAdmin.disconnect();
});

describe('hostile identifiers', () => {
  it('provisions them exactly as named, twice (idempotent), leaving everything else alone', async () => {
    const first = await provision(config);
    expect(first.applied.length).toBeGreaterThanOrEqual(4);
    expect(first.rolesCreated.sort()).toEqual(Object.values(ROLES).sort());
    const second = await provision(config);
    expect(second).toMatchObject({ applied: [], rolesCreated: [], passwordsSet: [], publication: 'present', limits: { changed: [], notValidated: [] } });

    await admin(async (c) => {
      const tables = await c.query<{ table_name: string }>('SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [NAMES.schema]);
      const names = tables.rows.map((r) => r.table_name);
      for (const t of [NAMES.table, NAMES.inboxTable, NAMES.heartbeatTable, NAMES.migrationsTable]) expect(names).toContain(t);
      const published = await c.query('SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1 ORDER BY tablename', [NAMES.publication]);
      expect(published.rows).toEqual(
        [NAMES.heartbeatTable, NAMES.table].sort().map((tablename) => ({ schemaname: NAMES.schema, tablename })),
      );
      // Nothing the names "say" happened: public and its contents are still there.
      expect((await c.query("SELECT 1 FROM pg_namespace WHERE nspname = 'public'")).rowCount).toBe(1);
      const roles = await c.query('SELECT rolname, rolreplication FROM pg_roles WHERE rolname = ANY($1) ORDER BY rolname', [Object.values(ROLES)]);
      expect(roles.rows).toHaveLength(Object.keys(ROLES).length);
      expect(roles.rows.find((r) => r.rolname === ROLES.cdc)?.rolreplication).toBe(true);
      // 008 found 001's unnamed CHECK under the name PostgreSQL gave it; the named limits replace it.
      const checks = await c.query<{ conname: string }>(
        "SELECT conname FROM pg_constraint co JOIN pg_class t ON t.oid = co.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = $1 AND t.relname = $2 AND co.contype = 'c'",
        [NAMES.schema, NAMES.table],
      );
      expect(checks.rows.map((r) => r.conname)).toContain('outbox_aggregate_type_topic');
      expect(checks.rows.map((r) => r.conname)).not.toContain(`${NAMES.table}_aggregate_type_check`);
      const policies = await c.query('SELECT policyname, roles::text[] AS roles FROM pg_policies WHERE schemaname = $1 AND tablename = $2 ORDER BY policyname', [NAMES.schema, NAMES.table]);
      expect(policies.rows).toEqual([
        { policyname: 'outbox_app_own_transaction', roles: [ROLES.app] },
        { policyname: 'outbox_unrestricted', roles: ['public'] },
      ]);
    });
  });

  it('writes events as the application role, reads them back, and cleans up with deleteAfterInsert', async () => {
    const writer = createOutboxWriter({ outbox: config.outbox, codec: jsonEncoder, contentType: 'application/json' });
    const cleaning = createOutboxWriter({ outbox: config.outbox, codec: jsonEncoder, contentType: 'application/json', deleteAfterInsert: true });
    const [kept, removed] = await asApp(async (c) => {
      await c.query('BEGIN');
      const a = await writer.writeEvent(c, { aggregateType: 'order', aggregateId: `o'1"; --`, type: 'OrderCreated', payload: { note: `it's "quoted"` } });
      const b = await cleaning.writeEvent(c, { aggregateType: 'order', aggregateId: '2', type: 'OrderCreated', payload: {} });
      const prepared = await writer.prepareInsert([{ aggregateType: 'order', aggregateId: '3', type: 'OrderShipped', payload: {} }]);
      await c.query(prepared.text, prepared.values);
      await c.query('COMMIT');
      return [a, b];
    });
    const rows = await admin((c) => c.query(`SELECT id, aggregate_id, convert_from(payload, 'UTF8') AS payload FROM ${outboxTable()} ORDER BY aggregate_id`));
    expect(rows.rows.map((r) => r.aggregate_id)).toEqual([`3`, `o'1"; --`].sort());
    expect(rows.rows.find((r) => r.id === kept.id)?.payload).toBe(JSON.stringify({ note: `it's "quoted"` }));
    expect(rows.rows.some((r) => r.id === removed.id)).toBe(false);
    await admin((c) => c.query(`DELETE FROM ${outboxTable()}`));
  });

  it(`refuses a payload over outbox.maxPayloadBytes with PAYLOAD_TOO_LARGE naming its size and the setting, writing nothing`, async () => {
    const writer = createOutboxWriter({ outbox: config.outbox, codec: jsonEncoder, contentType: 'application/json' });
    const big = { blob: 'x'.repeat(3000) };
    const size = Buffer.byteLength(JSON.stringify(big));
    await asApp(async (c) => {
      await c.query('BEGIN');
      const error = await rejection(writer.writeEvent(c, { aggregateType: 'order', aggregateId: 'big', type: 'OrderCreated', payload: big }));
      expect(error.code).toBe('PAYLOAD_TOO_LARGE');
      expect(error.message).toContain(`${size} bytes`);
      expect(error.message).toContain('limit is 2048');
      expect(error.message).toContain('outbox.maxPayloadBytes');
      expect(error.message).toContain('OUTBOX_MAX_PAYLOAD_BYTES');
      expect(error.details).toEqual({ bytes: size, limit: 2048 });
      // The transaction is still usable: nothing was sent to the database.
      await writer.writeEvent(c, { aggregateType: 'order', aggregateId: 'small', type: 'OrderCreated', payload: {} });
      await c.query('COMMIT');
    });
    // The same limit in the database (db:provision's named constraint), for a row inserted by plain SQL.
    await asApp((c) =>
      expect(
        c.query(
          `INSERT INTO ${outboxTable()} (id, aggregate_type, aggregate_id, event_type, payload, content_type) VALUES (gen_random_uuid(), 'order', 'raw', 'OrderCreated', $1, 'application/json')`,
          [Buffer.alloc(3000)],
        ),
      ).rejects.toMatchObject({ code: '23514', constraint: 'outbox_payload_size' }),
    );
    const rows = await admin((c) => c.query(`SELECT aggregate_id FROM ${outboxTable()}`));
    expect(rows.rows).toEqual([{ aggregate_id: 'small' }]);
    await admin((c) => c.query(`DELETE FROM ${outboxTable()}`));
  });

  it("applies an event once through the router's inbox transaction, as the router role", async () => {
    const pool = createPool({ ...config.database, user: ROLES.router, password: config.roles.routerPassword as string });
    try {
      const inbox = qualified(NAMES.schema, NAMES.inboxTable);
      const messageId = '00000000-0000-4000-8000-00000000beef';
      let runs = 0;
      const run = async () => void runs++;
      expect(await applyOnce(pool, inbox, `consumer "x"`, messageId, run)).toBe('applied');
      expect(await applyOnce(pool, inbox, `consumer "x"`, messageId, run)).toBe('duplicate');
      expect(runs).toBe(1);
      const rows = await admin((c) => c.query(`SELECT consumer, message_id FROM ${inbox}`));
      expect(rows.rows).toEqual([{ consumer: `consumer "x"`, message_id: messageId }]);
    } finally {
      await pool.end();
    }
  });

  it("runs the connector's heartbeat query as the CDC role", async () => {
    const client = new Client({ ...pgConfig(db.name), user: ROLES.cdc, password: config.roles.cdcPassword });
    await client.connect();
    try {
      await client.query(heartbeatQuery(NAMES.schema, NAMES.heartbeatTable));
      await client.query(heartbeatQuery(NAMES.schema, NAMES.heartbeatTable));
      const beats = await client.query(`SELECT count(*)::int AS n FROM ${qualified(NAMES.schema, NAMES.heartbeatTable)}`);
      expect(beats.rows[0].n).toBe(1);
    } finally {
      await client.end();
    }
  });

  it('refuses to build a connector for a publication name Debezium would pass unquoted to pgoutput', () => {
    const error = thrown(() => buildConnectorConfig(config));
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('outbox.publication');
  });

  it('passes Kafka Connect validation, deploys, and routes an event written to the hostile table', async () => {
    expect((await provision(streamable)).publication).toBe('created');
    const connect = createConnectClient(streamable.connect);
    const validation = await connect.validate(buildConnectorConfig(streamable));
    expect(validation).toEqual({ errorCount: 0, fields: [] });

    const result = await deployConnector(streamable);
    expect(result.action).toBe('created');
    expect(result.status?.tasks.map((t) => t.state)).toEqual(['RUNNING']);

    const writer = createOutboxWriter({ outbox: streamable.outbox, codec: jsonEncoder, contentType: 'application/json', deleteAfterInsert: true });
    const written = await asApp(async (c) => {
      await c.query('BEGIN');
      const w = await writer.writeEvent(c, { aggregateType: 'order', aggregateId: 'hostile-1', type: 'OrderCreated', payload: { ok: true } });
      await c.query('COMMIT');
      return w;
    });
    const topic = `sec-${id}.event.order`;
    const records = await collect([topic], (r) => r.some((x) => x.headers.id === written.id), 90_000);
    const record = records.find((x) => x.headers.id === written.id);
    expect(record).toMatchObject({ key: 'hostile-1', headers: { eventType: 'OrderCreated', contentType: 'application/json' } });
    expect(JSON.parse(record?.value.toString('utf8') ?? 'null')).toEqual({ ok: true });
  });
});
