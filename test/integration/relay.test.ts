import type { Client, Pool, PoolClient } from 'pg';
import { AVRO_CONTENT_TYPE, createCodec, JSON_CONTENT_TYPE, topicForReplacement } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { createKafka } from '../../src/kafka';
import { createLogger } from '../../src/log';
import { createOutboxWriter, type OutboxEvent, type OutboxWriter } from '../../src/producer';
import { uuidv7 } from '../../src/producer/uuidv7';
import { loadMigrations, provision } from '../../src/provision';
import { renderSql, type Migration } from '../../src/provision/sql-files';
import { createRelay, createRelayMetrics, type Relay, type RelayEventName, type RelayOptions } from '../../src/relay';
import { createRouter, type Router, type RoutedEvent } from '../../src/router';
import { createEffectsTable, recordingHandler } from '../support/effects';
import { collect } from '../support/consume';
import { rejection } from '../support/expect-error';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, withClient, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

jest.setTimeout(120_000);

/**
 * The polling relay on the real stack: PostgreSQL outbox → relay → Kafka → (router). A fresh database
 * per file; topics carry a random prefix (connector.topicReplacement) and JSON tests random aggregate
 * types, so no other test sees these records.
 */
describe('polling relay', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let writer: OutboxWriter;
  let prefix: string;
  const relays: Relay[] = [];
  const silent = createLogger({ level: (process.env.RELAY_TEST_LOG as 'debug' | undefined) ?? 'silent', format: 'json' });

  beforeAll(async () => {
    db = await freshDatabase('relay');
    prefix = randomName('t').replace(/-/g, '');
    const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
    config = testConfig(db.name, { connector: { topicReplacement, topicPrefix: prefix } });
    await provision(config);
    pool = createPool(config.database, { max: 8 });
    await createEffectsTable(pool);
    // A business table whose row is the aggregate: writers update it, and so lock it, before writing the event.
    await pool.query('CREATE TABLE accounts (id text PRIMARY KEY, version int NOT NULL DEFAULT 0)');
    const codec = createCodec({ registry: config.registry, autoRegister: true, topicFor: topicForReplacement(topicReplacement) });
    writer = createOutboxWriter({ outbox: config.outbox, codec, contentType: JSON_CONTENT_TYPE });
  });

  afterEach(async () => {
    await Promise.all(relays.splice(0).map((r) => r.stop()));
  });

  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  const topicOf = (aggregateType: string) => `${prefix}.outbox.event.${aggregateType}`;

  async function startRelay(extra: Partial<RelayOptions> = {}, settings: RelayOptions['settings'] = {}): Promise<Relay> {
    const relay = createRelay({ config, logger: silent, ...extra, settings: { workers: 2, pollIntervalMs: 20, ...settings } });
    relays.push(relay);
    await relay.start();
    return relay;
  }

  async function inTx<T>(body: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const result = await body(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }

  /** Waits, but never forever: a blocked partition fails the test instead of hanging it. */
  const until = waitsUpTo(60_000);

  const unpublished = async (ids: string[]) =>
    Number((await pool.query('SELECT count(*) AS n FROM outbox WHERE id = ANY($1::uuid[]) AND published_at IS NULL', [ids])).rows[0].n);

  it('publishes the Event Router record byte for byte, and the router applies it through the inbox', async () => {
    const avro = createOutboxWriter({ outbox: config.outbox, codec: createCodec({ registry: config.registry, autoRegister: true, topicFor: topicForReplacement(config.connector.topicReplacement) }) });
    const orderId = randomName('order');
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    // One transaction: the relay publishes in insert order (seq), as CDC does (docs/relay.md, "What order is guaranteed").
    const now = Date.now();
    const events: OutboxEvent[] = [
      { id: uuidv7(now), aggregateType: 'order', aggregateId: orderId, type: 'OrderCancelled', payload: { orderId, reason: '0', cancelledAt: new Date() }, traceparent, headers: { tenant: 'acme' } },
      { id: uuidv7(now + 1), aggregateType: 'order', aggregateId: orderId, type: 'OrderCancelled', payload: { orderId, reason: '1', cancelledAt: new Date() } },
    ];
    const written = await inTx((c) => avro.writeEvents(c, events));
    const rows = (await pool.query('SELECT id, payload, headers FROM outbox WHERE id = ANY($1::uuid[]) ORDER BY id', [written.map((w) => w.id)])).rows as Array<{ id: string; payload: Buffer; headers: string | null }>;

    const relay = await startRelay();
    const topic = topicOf('order');
    const records = await collect([topic], (rs) => rs.length >= 2);
    expect(records).toHaveLength(2);
    for (const [i, record] of records.entries()) {
      const row = rows[i] as (typeof rows)[number];
      expect(record.topic).toBe(topic);
      expect(record.key).toBe(orderId);
      // The payload column's bytes, unchanged: Confluent framing (0x00 + schema id) + Avro body.
      expect(record.value.equals(row.payload)).toBe(true);
      expect(record.value[0]).toBe(0);
      expect(record.headers).toMatchObject({ id: row.id, eventType: 'OrderCancelled', contentType: AVRO_CONTENT_TYPE });
    }
    // A NULL traceparent/headers column: the SMT sends a null-valued header, the relay none (docs/relay.md).
    expect(records[0]?.headers).toEqual({ id: rows[0]?.id, eventType: 'OrderCancelled', contentType: AVRO_CONTENT_TYPE, traceparent, headers: JSON.stringify({ tenant: 'acme' }) });
    expect(records[1]?.headers).toEqual({ id: rows[1]?.id, eventType: 'OrderCancelled', contentType: AVRO_CONTENT_TYPE });
    await until('rows marked published', () => unpublished(rows.map((r) => r.id)), (n) => n === 0);
    expect(relay.stats()).toMatchObject({ published: 2, failed: 0 });

    const seen: RoutedEvent[] = [];
    const router: Router = createRouter({
      config,
      consumer: `c-${prefix}`,
      groupId: randomName('g'),
      allowGroupIdMismatch: true,
      topics: new RegExp(`^${prefix}\\.outbox\\.event\\.order$`),
      logger: silent,
      handlers: {
        order: {
          OrderCancelled: recordingHandler(seen),
        },
      },
    });
    await router.start();
    try {
      await until('router applied both', () => router.stats(), (s) => s.applied === 2);
    } finally {
      await router.stop();
    }
    expect(router.stats()).toMatchObject({ applied: 2, deadLettered: 0 });
    const effects = (await pool.query('SELECT message_id, aggregate_id, reason, tenant, traceparent FROM effects ORDER BY seq')).rows;
    expect(effects).toEqual([
      { message_id: written[0]?.id, aggregate_id: orderId, reason: '0', tenant: 'acme', traceparent },
      { message_id: written[1]?.id, aggregate_id: orderId, reason: '1', tenant: null, traceparent: null },
    ]);
    const inbox = (await pool.query('SELECT message_id FROM inbox WHERE consumer = $1 ORDER BY message_id', [`c-${prefix}`])).rows.map((r) => r.message_id);
    expect(inbox).toEqual(written.map((w) => w.id).sort());
    // The SMT's null headers (no traceparent, no extra headers) reach the handler as absent.
    expect(seen[1]?.headers).toEqual({});
    expect(seen[1]?.traceparent).toBeUndefined();
  });

  it('publishes an event whose transaction inserted first but committed last (the id-cursor trap)', async () => {
    const type = randomName('agg');
    const relay = await startRelay({}, { workers: 1 });
    const slow = await pool.connect();
    try {
      await slow.query('BEGIN');
      const early = await writer.writeEvent(slow, { aggregateType: type, aggregateId: 'a-early', type: 'Happened', payload: { n: 1 } });
      // A later transaction commits while the first is still open: its id and created_at are larger.
      const late = await inTx((c) => writer.writeEvent(c, { aggregateType: type, aggregateId: 'a-late', type: 'Happened', payload: { n: 2 } }));
      expect(early.id < late.id).toBe(true); // UUIDv7: an id cursor would now stand past `early`
      const first = await collect([topicOf(type)], (rs) => rs.some((r) => r.headers.id === late.id));
      expect(first.map((r) => r.headers.id)).toEqual([late.id]);
      await until('late row published', () => unpublished([late.id]), (n) => n === 0);
      await slow.query('COMMIT');
      const all = await collect([topicOf(type)], (rs) => [early.id, late.id].every((id) => rs.some((r) => r.headers.id === id)));
      // Different keys, so possibly different partitions: no order between them, exactly one of each.
      expect(all.map((r) => r.headers.id).sort()).toEqual([early.id, late.id].sort());
      const times = (await pool.query('SELECT id, created_at FROM outbox WHERE id = ANY($1::uuid[]) ORDER BY created_at', [[early.id, late.id]])).rows.map((r) => r.id);
      expect(times).toEqual([early.id, late.id]); // created_at order too: a timestamp cursor would miss it as well
      expect(relay.stats().published).toBeGreaterThanOrEqual(2);
    } finally {
      await slow.query('ROLLBACK').catch(() => {});
      slow.release();
    }
  });

  it('deletes published rows after retention, in batches, and reports lag, queries and metrics', async () => {
    const type = randomName('agg');
    const metrics = createRelayMetrics();
    // Nothing must be deleted before it is published: a row written now is unpublished until the relay runs.
    const ids = await inTx(async (c) =>
      (await writer.writeEvents(c, Array.from({ length: 30 }, (_, i) => ({ aggregateType: type, aggregateId: `k${i % 3}`, type: 'Happened', payload: { i } })))).map((w) => w.id),
    );
    const relay = await startRelay({ onEvent: metrics.onEvent }, { retentionMs: 0, cleanupIntervalMs: 100, cleanupBatchSize: 7, lagIntervalMs: 100, batchSize: 10 });
    const records = await collect([topicOf(type)], (rs) => rs.length >= 30);
    expect(new Set(records.map((r) => r.headers.id))).toEqual(new Set(ids));
    await until('published rows deleted', async () => Number((await pool.query('SELECT count(*) AS n FROM outbox WHERE id = ANY($1::uuid[])', [ids])).rows[0].n), (n) => n === 0);
    const stats = relay.stats();
    expect(stats.deleted).toBeGreaterThanOrEqual(30);
    expect(stats.queries).toBeGreaterThan(0);
    expect(stats.batches).toBeGreaterThanOrEqual(3); // batch size 10
    const text = await metrics.registry.metrics();
    expect(text).toMatch(new RegExp(`outbox_relay_published_total\\{topic="${topicOf(type).replace(/\./g, '\\.')}"\\} 30`));
    expect(text).toMatch(/outbox_relay_deleted_total \d+/);
    expect(text).toMatch(/outbox_relay_queries_total \d+/);
    expect(text).toMatch(/outbox_relay_lag_seconds \d/);
    expect(text).toMatch(/outbox_relay_claim_seconds_count \d+/);
  });

  it('measures the age of the oldest unpublished row as lag', async () => {
    const type = randomName('agg');
    // An unpublished row a minute old that the relay cannot claim yet: another transaction holds its row lock.
    const [id] = await inTx(async (c) => [(await writer.writeEvent(c, { aggregateType: type, aggregateId: 'old', type: 'Happened', payload: {} })).id]);
    await pool.query("UPDATE outbox SET created_at = now() - interval '60 seconds' WHERE id = $1", [id]);
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM outbox WHERE id = $1 FOR UPDATE', [id]); // SKIP LOCKED passes it over
      const relay = await startRelay({}, { lagIntervalMs: 50, workers: 1 });
      const lag = await until('lag measured', () => relay.stats().lagSeconds, (s) => s >= 59);
      expect(lag).toBeLessThan(600);
      expect(await unpublished([id as string])).toBe(1);
      await holder.query('COMMIT');
      await until('row published once the lock is gone', () => unpublished([id as string]), (n) => n === 0);
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
    }
  });

  it('publishes one key\'s large payloads (over 1 MiB together) in order instead of blocking the key for good', async () => {
    const type = randomName('agg');
    const big = (n: number) => ({ n, blob: 'x'.repeat(600 * 1024) });
    const ids = await inTx(async (c) => {
      const out: string[] = [];
      // Separate statements: seq numbers them in this order.
      for (let n = 0; n < 3; n++) {
        out.push((await writer.writeEvent(c, { id: uuidv7(Date.now() + n), aggregateType: type, aggregateId: 'big', type: 'Happened', payload: big(n) })).id);
      }
      return out;
    });
    const relay = await startRelay({}, { workers: 1 });
    await until('large rows published', () => unpublished(ids), (n) => n === 0);
    const records = await collect([topicOf(type)], (rs) => rs.length >= 3);
    expect(records.map((r) => (JSON.parse(r.value.toString('utf8')) as { n: number }).n)).toEqual([0, 1, 2]);
    expect(records.map((r) => r.headers.id)).toEqual(ids);
    expect(relay.stats().failed).toBe(0);
  });

  it('publishes one aggregate\'s events in commit order when the transaction that started first wrote last', async () => {
    const type = randomName('agg');
    const account = randomName('acct');
    await pool.query('INSERT INTO accounts (id) VALUES ($1)', [account]);
    const first = await pool.connect();
    try {
      // T1 starts (its now(), hence created_at, is fixed here) ...
      await first.query('BEGIN');
      await first.query('SELECT now()');
      // ... T2 starts later, updates the aggregate, writes event A and commits ...
      const a = await inTx(async (c) => {
        await c.query('UPDATE accounts SET version = version + 1 WHERE id = $1', [account]);
        return writer.writeEvent(c, { aggregateType: type, aggregateId: account, type: 'Happened', payload: { n: 'A' } });
      });
      // ... then T1 updates the aggregate, writes event B and commits: B follows A on the aggregate.
      await first.query('UPDATE accounts SET version = version + 1 WHERE id = $1', [account]);
      const b = await writer.writeEvent(first, { aggregateType: type, aggregateId: account, type: 'Happened', payload: { n: 'B' } });
      await first.query('COMMIT');
      const created = (await pool.query('SELECT id FROM outbox WHERE id = ANY($1::uuid[]) ORDER BY created_at', [[a.id, b.id]])).rows.map((r) => r.id);
      expect(created).toEqual([b.id, a.id]); // the setting of the defect: transaction start order is B, A

      await startRelay({}, { workers: 1 });
      const records = await collect([topicOf(type)], (rs) => rs.length >= 2);
      expect(records.map((r) => r.headers.id)).toEqual([a.id, b.id]);
    } finally {
      await first.query('ROLLBACK').catch(() => {});
      first.release();
    }
  });

  it('does not let a later event of an aggregate overtake an earlier one that another session holds locked', async () => {
    const type = randomName('agg');
    const write = (aggregateId: string, n: number) => inTx((c) => writer.writeEvent(c, { aggregateType: type, aggregateId, type: 'Happened', payload: { n } }));
    const e1 = await write('held', 1);
    const e2 = await write('held', 2);
    const other = await write('free', 3);
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM outbox WHERE id = $1 FOR UPDATE', [e1.id]); // SKIP LOCKED passes e1 over
      await startRelay({}, { workers: 1 }); // one shard: every claim sees all three rows
      await until('the other aggregate published', () => unpublished([other.id]), (n) => n === 0);
      expect(await unpublished([e1.id, e2.id])).toBe(2);
      await holder.query('COMMIT');
      await until('held aggregate published', () => unpublished([e1.id, e2.id]), (n) => n === 0);
      const records = await collect([topicOf(type)], (rs) => rs.length >= 3);
      expect(records.filter((r) => r.key === 'held').map((r) => r.headers.id)).toEqual([e1.id, e2.id]);
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
    }
  });

  it('bounds the bytes of a batch by maxBatchBytes (at most one row over), and sends a row larger than the budget alone', async () => {
    const type = randomName('agg');
    const budget = 300 * 1024;
    const blob = (kib: number) => 'x'.repeat(kib * 1024);
    const ids = await inTx(async (c) => {
      const out: string[] = [];
      for (let n = 0; n < 6; n++) out.push((await writer.writeEvent(c, { aggregateType: type, aggregateId: `k${n % 2}`, type: 'Happened', payload: { n, blob: blob(100) } })).id);
      out.push((await writer.writeEvent(c, { aggregateType: type, aggregateId: 'huge', type: 'Happened', payload: { n: 6, blob: blob(400) } })).id);
      return out;
    });
    const batches: Array<{ claimed: number; bytes: number }> = [];
    const onEvent = (name: RelayEventName, data: Record<string, unknown>) => {
      // Only batches with this test's rows (a row left unpublished by an earlier test would be claimed too).
      const ours = (data.publishedByTopic as Record<string, number> | undefined)?.[topicOf(type)];
      if (name === 'relay.batch' && ours) batches.push({ claimed: data.claimed as number, bytes: data.bytes as number });
    };
    const metrics = createRelayMetrics();
    await startRelay({ onEvent: (name, data) => (onEvent(name, data), metrics.onEvent(name, data)) }, { workers: 1, maxBatchBytes: budget });
    await until('all rows published', () => unpublished(ids), (n) => n === 0);
    const records = await collect([topicOf(type)], (rs) => rs.length >= 7);
    expect(records.filter((r) => r.key === 'k0').map((r) => r.headers.id)).toEqual([ids[0], ids[2], ids[4]]);

    expect(batches.reduce((n, b) => n + b.claimed, 0)).toBe(7);
    // 600 KiB of 100 KiB rows cannot fit one 300 KiB batch, and the 400 KiB row goes alone: at least 3 batches.
    expect(batches.length).toBeGreaterThanOrEqual(3);
    const largestRow = 401 * 1024; // the 400 KiB payload plus its JSON and headers
    for (const batch of batches) {
      expect(typeof batch.bytes).toBe('number');
      expect(batch.bytes).toBeLessThan(budget + largestRow);
      // A batch over the budget is a single row, or ends with the one row that crossed it (at most 101 KiB here).
      if (batch.claimed > 1) expect(batch.bytes).toBeLessThan(budget + 101 * 1024);
    }
    expect(batches.some((b) => b.claimed === 1 && b.bytes > budget)).toBe(true);
    expect(await metrics.registry.metrics()).toMatch(/outbox_relay_batch_bytes_count [1-9]/);
  });

  it('migration 007 numbers existing unpublished rows in their old claim order, below every new row', async () => {
    const other = await freshDatabase('relaymig');
    try {
      const cfg = testConfig(other.name);
      const migrations = loadMigrations();
      const apply = (c: Client, m: Migration) => c.query(renderSql(m.template, cfg, m.name));
      await withClient(other.name, async (c) => {
        for (const m of migrations.filter((x) => x.id < 7)) await apply(c, m);
        // Physical order differs from (created_at, id); one row is already published.
        const insert = "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type, created_at, published_at) VALUES ($1, 't', 'k', 'E', '\\x7b7d', 'application/json', $2, $3)";
        await c.query(insert, ['00000000-0000-4000-8000-000000000003', '2026-01-01T00:00:03Z', null]);
        await c.query(insert, ['00000000-0000-4000-8000-000000000001', '2026-01-01T00:00:01Z', null]);
        await c.query(insert, ['00000000-0000-4000-8000-000000000009', '2026-01-01T00:00:00Z', '2026-01-01T00:00:05Z']);
        await c.query(insert, ['00000000-0000-4000-8000-000000000002', '2026-01-01T00:00:01Z', null]);
        // A relay of this release refuses a table without seq, and says how to add it.
        const stale = await rejection(createRelay({ config: cfg, logger: silent }).start());
        expect(stale.code).toBe('RELAY_TABLE_INVALID');
        expect(stale.message).toContain('db:provision');
        await apply(c, migrations.find((m) => m.id === 7) as Migration);
        // A plain INSERT with only the documented columns still works: seq has its default.
        await c.query("INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type) VALUES ('00000000-0000-4000-8000-000000000000', 't', 'k', 'E', '\\x7b7d', 'application/json')");
        const order = (await c.query('SELECT id FROM outbox WHERE published_at IS NULL ORDER BY seq')).rows.map((r) => r.id.slice(-1));
        expect(order).toEqual(['1', '2', '3', '0']);
        await expect(c.query("INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type, seq) VALUES (gen_random_uuid(), 't', 'k', 'E', '\\x7b7d', 'application/json', 1)")).rejects.toMatchObject({ code: '428C9' });
      });
    } finally {
      await other.drop();
    }
  });

  it('refuses bad settings, a missing table, an unreachable database or broker, and a second instance with another worker count', async () => {
    const bad = await rejection(Promise.resolve().then(() => createRelay({ config, settings: { workers: 0 } })));
    expect(bad.code).toBe('CONFIG_INVALID');
    expect(bad.message).toContain('relay.workers');
    expect(bad.message).toContain('got 0');

    const other = await freshDatabase('relaybare');
    try {
      const bare = testConfig(other.name);
      const missing = await rejection(createRelay({ config: bare, logger: silent }).start());
      expect(missing.code).toBe('RELAY_TABLE_INVALID');
      expect(missing.message).toContain('db:provision');
    } finally {
      await other.drop();
    }

    const noDb = testConfig(db.name, { database: { port: 1 } });
    const unreachable = await rejection(createRelay({ config: noDb, logger: silent }).start());
    expect(unreachable.code).toBe('DB_UNAVAILABLE');
    expect(unreachable.message).toContain(':1/');
    expect(unreachable.message).not.toMatch(/password|postgres:postgres/i);

    const noKafka = testConfig(db.name, { kafka: { brokers: ['127.0.0.1:1'] } });
    const broker = await rejection(createRelay({ config: noKafka, logger: silent, kafka: createKafka(noKafka, { retries: 0 }) }).start());
    expect(broker.code).toBe('RELAY_KAFKA_UNAVAILABLE');
    expect(broker.message).toContain('127.0.0.1:1');

    await startRelay({}, { workers: 2 });
    const mismatch = await rejection(createRelay({ config, logger: silent, settings: { workers: 3 } }).start());
    expect(mismatch.code).toBe('RELAY_WORKERS_MISMATCH');
    expect(mismatch.message).toMatch(/runs with 2 worker\(s\), this one with 3/);
    // Same count: a second instance joins.
    const second = await startRelay({}, { workers: 2 });
    expect(second.health()).toMatchObject({ running: true, workers: 2, listening: false, publishing: { healthy: true } }); // relay.notify is off here
  });
});
