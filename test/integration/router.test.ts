import axios from 'axios';
import { randomUUID } from 'node:crypto';
import type { IHeaders } from 'kafkajs';
import { AVRO_CONTENT_TYPE, JSON_CONTENT_TYPE } from '../../src/codec';
import { createRouterMetrics, startHealthServer, type Handlers, type Router } from '../../src/router';
import { collect } from '../support/consume';
import { randomName } from '../support/stack-env';
import { routerHarness, type Rec } from '../support/router-scenario';

jest.setTimeout(120_000);

/**
 * The router on the real stack. Records are produced straight to Kafka in the Event Router's shape
 * (key = aggregate id; headers id, eventType, contentType, headers; Avro value framed by the codec), on
 * topics of their own per test, so tests never see each other's records.
 */
describe('router', () => {
  const h = routerHarness();
  const { scenario, produce, handlers, startRouter, until, effects } = h;
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

  it('a batch handler applies each event exactly once across a redelivery and a rewind, with one set-based statement per run', async () => {
    const s = await scenario(2);
    const calls: string[][] = [];
    const batch: Handlers = {
      order: {
        OrderCancelled: {
          batch: async (events, { tx }) => {
            calls.push(events.map((e) => e.id));
            await tx.query(
              'INSERT INTO effects (run, message_id, aggregate_id, reason, tenant) SELECT $1, m, a, r, t FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[]) AS e(m, a, r, t)',
              [s.run, events.map((e) => e.id), events.map((e) => e.aggregateId), events.map((e) => e.payload.reason), events.map((e) => e.headers.tenant ?? null)],
            );
          },
        },
      },
    };
    const first = await produce(s, Array.from({ length: 60 }, (_, i) => ({ key: `k${i % 6}`, reason: `r${i}` })));
    await produce(s, first); // the same ids again: a redelivery
    const groupId = randomName('g');
    const r1 = await startRouter(s, batch, { groupId });
    await until('120 records handled', () => r1.stats(), (st) => st.applied + st.duplicates === 120);
    expect(r1.stats()).toMatchObject({ applied: 60, duplicates: 60, deadLettered: 0 });
    await r1.stop();
    // Only fresh events reach the handler, each once, and runs are batched.
    expect(calls.flat().sort()).toEqual(first.map((r) => r.id).sort());
    expect(Math.max(...calls.map((c) => c.length))).toBeGreaterThan(1);
    const rows = await effects(s);
    expect(rows).toHaveLength(60);
    // Per key, the effects are in the produced order.
    for (const key of ['k0', 'k1', 'k2', 'k3', 'k4', 'k5']) {
      expect(rows.filter((r) => r.aggregate_id === key).map((r) => r.reason)).toEqual(first.filter((r) => r.key === key).map((r) => r.reason));
    }

    // A new group over the same inbox: Kafka replays everything, the handler is not called again.
    calls.length = 0;
    const r2 = await startRouter(s, batch);
    await until('rewind handled', () => r2.stats(), (st) => st.duplicates === 120);
    expect(calls).toEqual([]);
    expect(await effects(s)).toHaveLength(60);
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
    const inbox = await h.pool.query('SELECT 1 FROM inbox WHERE consumer = $1 AND message_id = $2', [`c-${s.run}`, rec?.id]);
    expect(inbox.rowCount).toBe(1);
  });

  it('dead-letters a record whose handler always fails, with the contract headers, and goes on with the partition', async () => {
    const s = await scenario(1);
    const [poison] = await produce(s, [
      { key: 'k1', reason: 'poison' },
      { key: 'k2', reason: 'after-1' },
      { key: 'k3', reason: 'after-2' },
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
    const inbox = await h.pool.query('SELECT 1 FROM inbox WHERE message_id = $1', [poison?.id]);
    expect(inbox.rowCount).toBe(0);
  });

  it('without a topics pattern, consumes the routed topics of connector.topicReplacement and dead-letters beside them', async () => {
    // Regression: the default pattern was ^outbox\.event\. whatever the replacement, so a router of a
    // deployment with its own topic names consumed nothing.
    const s = await scenario(1);
    const config = { ...h.config, connector: { ...h.config.connector, topicReplacement: `${s.run}.outbox.event.\${routedByValue}` } };
    await produce(s, [
      { key: 'k1', reason: 'poison' },
      { key: 'k2', reason: 'fine' },
    ]);
    const router = await startRouter(s, handlers(s, (reason) => (reason === 'poison' ? new Error('cannot apply poison') : undefined)), { config, topics: undefined, maxAttempts: 1 });
    await until('both handled', () => router.stats(), (st) => st.applied === 1 && st.deadLettered === 1);
    expect((await effects(s)).map((r) => r.reason)).toEqual(['fine']);
    const [letter] = await collect([s.dlq], (rs) => rs.length >= 1);
    expect(letter?.headers['x-original-topic']).toBe(s.topic);
  });

  it('dead-letters undecodable, header-less and unhandled records at once with the reason, and keeps running', async () => {
    const s = await scenario(1);
    const h = (extra: Record<string, string>): IHeaders => ({ id: randomUUID(), eventType: 'OrderCancelled', contentType: AVRO_CONTENT_TYPE, ...extra });
    const bad: Array<{ rec: Rec; code: string; mentions: RegExp }> = [
      { rec: { key: 'k', value: Buffer.from('not json {'), headers: h({ contentType: JSON_CONTENT_TYPE }) }, code: 'DECODE_FAILED', mentions: /JSON/i },
      { rec: { key: 'k', value: Buffer.from([1, 0, 0, 0, 1, 2, 3]), headers: h({}) }, code: 'DECODE_FAILED', mentions: /magic byte/ },
      { rec: { key: 'k', headers: { id: randomUUID(), contentType: AVRO_CONTENT_TYPE } }, code: 'RECORD_INVALID', mentions: /eventType/ },
      { rec: { key: 'k', headers: h({ eventType: 'OrderShipped' }) }, code: 'HANDLER_NOT_FOUND', mentions: /OrderShipped/ },
      // Any id up to 200 characters is an event id (a Debezium outbox's bigint or text id); a longer one is not.
      { rec: { key: 'k', headers: h({ id: 'x'.repeat(201) }) }, code: 'RECORD_INVALID', mentions: /at most 200/ },
    ];
    await produce(
      s,
      bad.map((b) => b.rec),
    );
    const router = await startRouter(s, handlers(s));
    // another key: 'k' is parked behind its dead letters (router-delivery.test.ts covers parking)
    const [good] = await produce(s, [{ key: 'k-good', reason: 'good' }]);
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
      // one record per transaction, so every first-try failure is exactly one retry
      { partitionsConsumedConcurrently: 3, maxTransactionRecords: 1 },
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
