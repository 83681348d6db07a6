import axios from 'axios';
import { Partitioners, type Admin, type IHeaders, type Producer } from 'kafkajs';
import type { Pool } from 'pg';
import { AVRO_CONTENT_TYPE, createCodec, JSON_CONTENT_TYPE, type Codec } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { createLogger } from '../../src/log';
import { provision } from '../../src/provision';
import { createRouter, createRouterMetrics, startHealthServer, type Handlers, type Router, type RouterOptions } from '../../src/router';
import { collect } from '../support/consume';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, testKafka, type FreshDatabase } from '../support/stack-env';
import { randomUUID } from 'node:crypto';

jest.setTimeout(120_000);

/**
 * The router on the real stack. Records are produced straight to Kafka in the Event Router's shape
 * (key = aggregate id; headers id, eventType, contentType, headers; Avro value framed by the codec), on
 * topics of their own per test, so tests never see each other's records.
 */
describe('router', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let admin: Admin;
  let producer: Producer;
  const routers: Router[] = [];
  const silent = createLogger({ level: 'silent' });

  beforeAll(async () => {
    db = await freshDatabase('router');
    config = testConfig(db.name);
    await provision(config);
    pool = createPool(config.database, { max: 4 });
    await pool.query('CREATE TABLE effects (seq bigserial PRIMARY KEY, run text NOT NULL, message_id uuid NOT NULL, aggregate_id text NOT NULL, reason text NOT NULL, tenant text)');
    const kafka = testKafka();
    admin = kafka.admin();
    producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await Promise.all([admin.connect(), producer.connect()]);
  });

  afterEach(async () => {
    await Promise.all(routers.splice(0).map((r) => r.stop()));
  });

  afterAll(async () => {
    await Promise.all([admin?.disconnect(), producer?.disconnect()]);
    await pool?.end();
    await db?.drop();
  });

  interface Scenario {
    run: string;
    topic: string;
    dlq: string;
    codec: Codec;
  }

  async function scenario(partitions: number): Promise<Scenario> {
    const run = randomName('t').replace(/-/g, '');
    const topic = `${run}.outbox.event.order`;
    const dlq = `${run}.outbox.dlq.order`;
    await admin.createTopics({ topics: [{ topic, numPartitions: partitions }, { topic: dlq, numPartitions: 1 }], waitForLeaders: true });
    return { run, topic, dlq, codec: createCodec({ registry: config.registry, autoRegister: true, topicFor: () => topic }) };
  }

  interface Rec {
    key: string;
    reason?: string;
    id?: string;
    headers?: IHeaders;
    value?: Buffer;
  }

  /** Event Router-shaped records; returns them with their ids. */
  async function produce(s: Scenario, recs: Rec[]): Promise<Array<Rec & { id: string; value: Buffer; headers: IHeaders }>> {
    const out = await Promise.all(
      recs.map(async (r) => {
        const value = r.value ?? (await s.codec.encode('order', 'OrderCancelled', { orderId: r.key, reason: r.reason ?? 'x', cancelledAt: new Date() }, AVRO_CONTENT_TYPE));
        const id = r.id ?? randomUUID();
        const headers: IHeaders = r.headers ?? { id, eventType: 'OrderCancelled', contentType: AVRO_CONTENT_TYPE, headers: JSON.stringify({ tenant: 'acme' }) };
        return { ...r, id, value, headers };
      }),
    );
    await producer.send({ topic: s.topic, acks: -1, messages: out.map((r) => ({ key: r.key, value: r.value, headers: r.headers })) });
    return out;
  }

  /** Records each applied event in `effects` through ctx.tx; `fail` decides per call whether to throw after writing. */
  function handlers(s: Scenario, fail: (reason: string, call: number) => Error | undefined = () => undefined): Handlers {
    const calls = new Map<string, number>();
    return {
      order: {
        OrderCancelled: async (event, { tx }) => {
          const call = (calls.get(event.id) ?? 0) + 1;
          calls.set(event.id, call);
          await tx.query('INSERT INTO effects (run, message_id, aggregate_id, reason, tenant) VALUES ($1, $2, $3, $4, $5)', [
            s.run,
            event.id,
            event.aggregateId,
            event.payload.reason,
            event.headers.tenant ?? null,
          ]);
          const error = fail(event.payload.reason, call);
          if (error) throw error;
        },
      },
    };
  }

  async function startRouter(s: Scenario, h: Handlers, extra: Partial<RouterOptions> = {}): Promise<Router> {
    const router = createRouter({
      config,
      handlers: h,
      topics: new RegExp(`^${s.run}\\.outbox\\.event\\.`),
      consumer: `c-${s.run}`,
      groupId: randomName('g'),
      backoff: { initialDelayMs: 5, maxDelayMs: 20 },
      logger: silent,
      ...extra,
    });
    routers.push(router);
    await router.start();
    return router;
  }

  async function until<T>(what: string, probe: () => T | Promise<T>, ok: (value: T) => boolean, timeoutMs = 45_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await probe();
      if (ok(value)) return value;
      if (Date.now() > deadline) throw new Error(`${what}: not reached within ${timeoutMs} ms; last: ${JSON.stringify(value)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  const effects = async (s: Scenario) =>
    (await pool.query('SELECT message_id, aggregate_id, reason, tenant FROM effects WHERE run = $1 ORDER BY seq', [s.run])).rows as Array<{
      message_id: string;
      aggregate_id: string;
      reason: string;
      tenant: string | null;
    }>;

  it('applies each event once when records are delivered twice, and after a rewind; stop() commits offsets', async () => {
    const s = await scenario(3);
    const first = await produce(s, Array.from({ length: 20 }, (_, i) => ({ key: `k${i % 4}`, reason: `r${i}` })));
    await produce(s, first); // the same ids again: an at-least-once redelivery
    const groupId = randomName('g');
    const r1 = await startRouter(s, handlers(s), { groupId });
    await until('40 records handled', () => r1.stats(), (st) => st.applied + st.duplicates === 40);
    expect(r1.stats()).toMatchObject({ applied: 20, duplicates: 20, deadLettered: 0 });
    const rows = await effects(s);
    expect(rows).toHaveLength(20);
    expect(new Set(rows.map((r) => r.message_id))).toEqual(new Set(first.map((r) => r.id)));
    expect(rows.every((r) => r.tenant === 'acme')).toBe(true);
    await r1.stop();

    // Same consumer (inbox), new group: Kafka replays everything, the inbox skips everything.
    const r2 = await startRouter(s, handlers(s));
    await until('rewind handled', () => r2.stats(), (st) => st.duplicates === 40);
    expect(r2.stats()).toMatchObject({ applied: 0, duplicates: 40 });
    await r2.stop();
    expect(await effects(s)).toHaveLength(20);

    // The first group resumes after its committed offsets: only the new record arrives.
    const r3 = await startRouter(s, handlers(s), { groupId });
    const [late] = await produce(s, [{ key: 'k9', reason: 'late' }]);
    await until('late record applied', () => r3.stats(), (st) => st.applied === 1);
    expect(r3.stats()).toMatchObject({ received: 1, applied: 1, duplicates: 0 });
    expect((await effects(s)).map((r) => r.message_id)).toContain(late?.id);
  });

  it('stop() finishes the record in hand and commits its offset before leaving the group', async () => {
    const s = await scenario(1);
    const [inHand] = await produce(s, [{ key: 'k1', reason: 'slow' }]);
    let entered!: () => void;
    const handlerEntered = new Promise<void>((resolve) => (entered = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const base = handlers(s);
    const slow: Handlers = {
      order: {
        OrderCancelled: async (event, ctx) => {
          entered();
          await gate;
          await base.order?.OrderCancelled?.(event, ctx);
        },
      },
    };
    const groupId = randomName('g');
    const r1 = await startRouter(s, slow, { groupId });
    await handlerEntered;
    let stopped = false;
    const stopping = r1.stop().then(() => (stopped = true));
    await new Promise((r) => setTimeout(r, 200));
    expect(stopped).toBe(false); // waits for the handler
    release();
    await stopping;
    expect(r1.stats()).toMatchObject({ applied: 1 });
    expect((await effects(s)).map((r) => r.message_id)).toEqual([inHand?.id]);

    const r2 = await startRouter(s, handlers(s), { groupId });
    await produce(s, [{ key: 'k1', reason: 'next' }]);
    await until('next applied', () => r2.stats(), (st) => st.applied === 1);
    expect(r2.stats()).toMatchObject({ received: 1, duplicates: 0 });
  });

  it('retries a handler that fails twice, rolling back its writes, then applies it once', async () => {
    const s = await scenario(1);
    const [rec] = await produce(s, [{ key: 'k1', reason: 'flaky' }]);
    const router = await startRouter(s, handlers(s, (_reason, call) => (call <= 2 ? new Error(`transient failure ${call}`) : undefined)));
    await until('applied', () => router.stats(), (st) => st.applied === 1);
    expect(router.stats()).toMatchObject({ applied: 1, retries: 2, deadLettered: 0 });
    expect((await effects(s)).map((r) => r.message_id)).toEqual([rec?.id]);
    const inbox = await pool.query('SELECT 1 FROM inbox WHERE consumer = $1 AND message_id = $2', [`c-${s.run}`, rec?.id]);
    expect(inbox.rowCount).toBe(1);
  });

  it('dead-letters a record whose handler always fails, with the contract headers, and goes on with the partition', async () => {
    const s = await scenario(1);
    const [poison] = await produce(s, [
      { key: 'k1', reason: 'poison' },
      { key: 'k1', reason: 'after-1' },
      { key: 'k1', reason: 'after-2' },
    ]);
    const router = await startRouter(s, handlers(s, (reason) => (reason === 'poison' ? new Error('cannot apply poison') : undefined)), { maxAttempts: 3 });
    await until('partition drained', () => router.stats(), (st) => st.applied === 2 && st.deadLettered === 1);
    expect(router.stats()).toMatchObject({ retries: 2 });
    expect((await effects(s)).map((r) => r.reason)).toEqual(['after-1', 'after-2']);

    const [letter] = await collect([s.dlq], (rs) => rs.length >= 1);
    expect(letter?.key).toBe('k1');
    expect(letter?.value.equals(poison?.value as Buffer)).toBe(true);
    expect(letter?.headers).toMatchObject({
      id: poison?.id,
      eventType: 'OrderCancelled',
      contentType: AVRO_CONTENT_TYPE,
      'x-original-topic': s.topic,
      'x-original-partition': '0',
      'x-original-offset': '0',
      'x-error-code': 'HANDLER_FAILED',
      'x-error-message': 'cannot apply poison',
      'x-attempts': '3',
    });
    const inbox = await pool.query('SELECT 1 FROM inbox WHERE message_id = $1', [poison?.id]);
    expect(inbox.rowCount).toBe(0);
  });

  it('dead-letters undecodable, header-less and unhandled records at once with the reason, and keeps running', async () => {
    const s = await scenario(1);
    const h = (extra: Record<string, string>): IHeaders => ({ id: randomUUID(), eventType: 'OrderCancelled', contentType: AVRO_CONTENT_TYPE, ...extra });
    const bad: Array<{ rec: Rec; code: string; mentions: RegExp }> = [
      { rec: { key: 'k', value: Buffer.from('not json {'), headers: h({ contentType: JSON_CONTENT_TYPE }) }, code: 'DECODE_FAILED', mentions: /JSON/i },
      { rec: { key: 'k', value: Buffer.from([1, 0, 0, 0, 1, 2, 3]), headers: h({}) }, code: 'DECODE_FAILED', mentions: /magic byte/ },
      { rec: { key: 'k', headers: { id: randomUUID(), contentType: AVRO_CONTENT_TYPE } }, code: 'RECORD_INVALID', mentions: /eventType/ },
      { rec: { key: 'k', headers: h({ eventType: 'OrderShipped' }) }, code: 'HANDLER_NOT_FOUND', mentions: /OrderShipped/ },
      { rec: { key: 'k', headers: h({ id: 'not-a-uuid' }) }, code: 'RECORD_INVALID', mentions: /not a UUID/ },
    ];
    await produce(
      s,
      bad.map((b) => b.rec),
    );
    const router = await startRouter(s, handlers(s));
    const [good] = await produce(s, [{ key: 'k', reason: 'good' }]);
    await until('all handled', () => router.stats(), (st) => st.deadLettered === 5 && st.applied === 1);
    expect(router.stats()).toMatchObject({ retries: 0 });
    expect((await effects(s)).map((r) => r.message_id)).toEqual([good?.id]);

    const letters = await collect([s.dlq], (rs) => rs.length >= 5);
    const byOffset = new Map(letters.map((l) => [l.headers['x-original-offset'], l.headers]));
    bad.forEach((b, offset) => {
      const headers = byOffset.get(String(offset));
      expect(headers?.['x-error-code']).toBe(b.code);
      expect(headers?.['x-error-message']).toMatch(b.mentions);
      expect(headers?.['x-attempts']).toBe('1');
    });
  });

  it('serves /healthz (503 until it has joined its group, 503 after stop) and /metrics counting outcomes and commit → handled latency', async () => {
    const s = await scenario(1);
    const metrics = createRouterMetrics();
    let router: Router | undefined;
    const http = await startHealthServer({
      host: '127.0.0.1',
      port: 0,
      registry: metrics.registry,
      health: () => {
        const h = router?.health() ?? { running: false, joined: false };
        return { healthy: h.running && h.joined, details: h };
      },
    });
    const get = (path: string) => axios.get<string>(`http://127.0.0.1:${http.port}${path}`, { validateStatus: () => true, responseType: 'text', transformResponse: (x) => x });
    try {
      expect((await get('/healthz')).status).toBe(503);
      router = await startRouter(s, handlers(s), { onEvent: metrics.onEvent });
      await until('healthz 200', () => get('/healthz'), (r) => r.status === 200);
      const [rec] = await produce(s, [{ key: 'k-1', reason: 'metrics' }]);
      await produce(s, [{ key: 'k-1', id: rec?.id, reason: 'metrics' }]); // a duplicate of the same event
      await produce(s, [{ key: 'k-2', headers: { id: randomUUID(), contentType: AVRO_CONTENT_TYPE } }]); // no eventType: dead letter
      await until('three outcomes', () => router?.stats() ?? { applied: 0, duplicates: 0, deadLettered: 0 }, (st) => st.applied === 1 && st.duplicates === 1 && st.deadLettered === 1);
      const text = (await get('/metrics')).data;
      expect(text).toContain(`outbox_router_records_total{topic="${s.topic}",outcome="applied"} 1`);
      expect(text).toContain(`outbox_router_records_total{topic="${s.topic}",outcome="duplicate"} 1`);
      expect(text).toContain(`outbox_router_records_total{topic="${s.topic}",outcome="dead_lettered"} 1`);
      expect(text).toMatch(/outbox_router_commit_to_handled_seconds_count 1\b/);
      expect(text).toMatch(/outbox_router_transaction_seconds_count 2\b/);
      await router.stop();
      expect((await get('/healthz')).status).toBe(503);
      expect((await get('/nope')).status).toBe(404);
    } finally {
      await http.close();
    }
  });

  it('keeps per-key order across 200 records over 10 keys on 3 partitions, through retries', async () => {
    const s = await scenario(3);
    const keys = Array.from({ length: 10 }, (_, i) => `agg-${i}`);
    const recs = Array.from({ length: 20 }, (_, seq) => keys.map((key) => ({ key, reason: String(seq) }))).flat();
    await produce(s, recs);
    // Every 7th event fails on its first try: a retry must not let later events of its key overtake it.
    const router = await startRouter(
      s,
      handlers(s, (reason, call) => (Number(reason) % 7 === 3 && call === 1 ? new Error('first try fails') : undefined)),
      { partitionsConsumedConcurrently: 3 },
    );
    await until('200 applied', () => router.stats(), (st) => st.applied === 200);
    expect(router.stats()).toMatchObject({ duplicates: 0, deadLettered: 0, retries: 30 });
    const rows = await effects(s);
    expect(rows).toHaveLength(200);
    for (const key of keys) {
      expect(rows.filter((r) => r.aggregate_id === key).map((r) => Number(r.reason))).toEqual(Array.from({ length: 20 }, (_, i) => i));
    }
  });
});
