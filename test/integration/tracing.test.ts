import { writeFileSync } from 'node:fs';
import { SpanStatusCode, trace } from '@opentelemetry/api';
import type { Pool } from 'pg';
import { createCodec, topicForReplacement } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { deleteConnector, deployConnector } from '../../src/connector';
import { createPool } from '../../src/db';
import { OutboxError } from '../../src/errors';
import { createLogger } from '../../src/log';
import { createOutboxWriter, type OutboxWriter, type WrittenEvent } from '../../src/producer';
import { provision } from '../../src/provision';
import { createRouter, type Router } from '../../src/router';
import { waitForTopics } from '../support/consume';
import { createEffectsTable, recordingHandler } from '../support/effects';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, type FreshDatabase } from '../support/stack-env';
import { registerTestTracing, type TestTracing } from '../support/tracing';
import { waitsUpTo } from '../support/until';

jest.setTimeout(180_000);

/**
 * One trace from the writing request to the handler, over the real pipeline: a span `create-order` in
 * the test, the writer inside it (no hand-passed traceparent: it takes the active span's), Debezium's
 * Event Router carrying the traceparent column as a header, and the router's handler span continuing
 * it. The SDK is an in-memory one, registered for this file only (test/support/tracing.ts).
 */
describe('a trace from the writer to the handler over the real CDC pipeline', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let writer: OutboxWriter;
  let prefix: string;
  let router: Router | undefined;
  let tracing: TestTracing;
  const until = waitsUpTo(90_000);

  beforeAll(async () => {
    tracing = registerTestTracing();
    db = await freshDatabase('tracing');
    prefix = randomName('t').replace(/-/g, '');
    const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
    config = testConfig(db.name, { connector: { topicReplacement, topicPrefix: prefix } });
    await provision(config);
    pool = createPool(config.database, { max: 4 });
    await createEffectsTable(pool);
    const codec = createCodec({ registry: config.registry, autoRegister: true, topicFor: topicForReplacement(topicReplacement) });
    writer = createOutboxWriter({ outbox: config.outbox, codec, contentType: 'application/json' });
    await deployConnector(config);
  });

  afterAll(async () => {
    await router?.stop();
    await deleteConnector(config, { dropSlot: true, force: true }).catch(() => {});
    await pool?.end();
    await db?.drop();
    await tracing?.shutdown();
  });

  /** Writes one event in a transaction inside the span `create-order`; returns the event and the span's context. */
  async function createOrder(aggregateId: string, type: string) {
    return trace.getTracer('test').startActiveSpan('create-order', async (span) => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const written: WrittenEvent = await writer.writeEvent(client, { aggregateType: 'order', aggregateId, type, payload: { orderId: aggregateId, reason: type } });
        await client.query('COMMIT');
        return { written, writerSpan: span.spanContext() };
      } finally {
        client.release();
        span.end();
      }
    });
  }

  it("continues the writer's span in the handler's span, with the messaging attributes; a dead letter is an error on its span", async () => {
    const placed = await createOrder(`o-${prefix}`, 'OrderPlaced');
    const topic = `${prefix}.outbox.event.order`;
    await waitForTopics([topic], 90_000);
    const applied: Array<Record<string, unknown>> = [];
    router = createRouter({
      onEvent: (name, data) => void (name === 'router.applied' && applied.push(data)),
      config,
      consumer: `c-${prefix}`,
      groupId: randomName('g'),
      allowGroupIdMismatch: true,
      topics: new RegExp(`^${prefix}\\.outbox\\.event\\.`),
      logger: createLogger({ level: 'silent' }),
      handlers: {
        order: {
          // The handler's own spans nest under the router's: here one around its write.
          OrderPlaced: (event, ctx) => trace.getTracer('test').startActiveSpan('insert-effect', (span) => recordingHandler([])(event, ctx).finally(() => span.end())),
          OrderRejected: async () => {
            throw new OutboxError('PAYLOAD_INVALID', 'no such customer', { retriable: false });
          },
        },
      },
    });
    await router.start();
    const rejected = await createOrder(`r-${prefix}`, 'OrderRejected');
    const r = router;
    await until('one applied, one dead-lettered', () => r.stats(), (st) => st.applied === 1 && st.deadLettered === 1);

    const spans = tracing.spans();
    const byName = (name: string) => spans.filter((s) => s.name === name);
    // One span per try: a try rolled back by a rebalance (outcome rolled-back) comes before the applied one.
    // Every try continues the writer's trace; the applied one carries the outcome checked below.
    const tries = byName('order.OrderPlaced process');
    for (const t of tries) expect(tracing.parentOf(t)).toBe(placed.writerSpan.spanId);
    const handled = tries.find((t) => t.attributes['outbox.outcome'] === 'applied');
    expect(handled).toBeDefined();
    expect(handled?.spanContext().traceId).toBe(placed.writerSpan.traceId);
    expect(tracing.parentOf(handled!)).toBe(placed.writerSpan.spanId);
    expect(handled?.attributes).toMatchObject({
      'messaging.system': 'kafka',
      'messaging.destination.name': topic,
      'messaging.destination.partition.id': String(applied[0]?.partition),
      'messaging.kafka.offset': Number(applied[0]?.offset),
      'messaging.kafka.message.key': `o-${prefix}`,
      'messaging.message.id': placed.written.id,
      'outbox.aggregate.type': 'order',
      'outbox.aggregate.id': `o-${prefix}`,
      'outbox.event.type': 'OrderPlaced',
      'outbox.outcome': 'applied',
    });
    expect(applied[0]?.id).toBe(placed.written.id);
    // The handler's own span nests under the try that ran it (a rolled-back try has one of its own).
    const effects = byName('insert-effect').map((e) => tracing.parentOf(e));
    expect(effects).toContain(handled?.spanContext().spanId);
    // The writer's traceparent went through the outbox column and the Event Router's header unchanged.
    const stored = (await pool.query('SELECT traceparent FROM effects WHERE message_id = $1', [placed.written.id])).rows[0]?.traceparent;
    expect(stored).toBe(`00-${placed.writerSpan.traceId}-${placed.writerSpan.spanId}-01`);

    // As above, a try rolled back by a rebalance may come first (the router subscribes the topic when it
    // appears, which rebalances its group): the try that dead-lettered is the one checked.
    const failed = byName('order.OrderRejected process').find((t) => t.attributes['outbox.outcome'] !== 'rolled-back');
    expect(failed?.spanContext().traceId).toBe(rejected.writerSpan.traceId);
    expect(tracing.parentOf(failed!)).toBe(rejected.writerSpan.spanId);
    expect(failed?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'no such customer' });
    expect(failed?.events.map((e) => e.name)).toEqual(['exception']);
    expect(failed?.attributes).toMatchObject({ 'outbox.outcome': 'dead-lettered', 'outbox.dead_letter.code': 'PAYLOAD_INVALID', 'outbox.dead_letter.topic': `${prefix}.outbox.dlq.order` });

    // The trace, for a reader of the test's output (TRACE_DUMP=<file>).
    const trace1 = spans
      .filter((s) => s.spanContext().traceId === placed.writerSpan.traceId)
      .map((s) => ({ name: s.name, spanId: s.spanContext().spanId, parentSpanId: tracing.parentOf(s) || null, kind: s.kind, attributes: s.attributes }));
    if (process.env.TRACE_DUMP) writeFileSync(process.env.TRACE_DUMP, JSON.stringify({ traceId: placed.writerSpan.traceId, spans: trace1 }, null, 2));
    // Without the tries a rebalance rolled back (checked above: each continues the trace) and their children.
    const rolledBack = new Set(trace1.filter((s) => s.attributes['outbox.outcome'] === 'rolled-back').map((s) => s.spanId));
    const kept = trace1.filter((s) => !rolledBack.has(s.spanId) && !rolledBack.has(s.parentSpanId ?? ''));
    expect(kept.map((s) => s.name).sort()).toEqual(['create-order', 'insert-effect', 'order.OrderPlaced process']);
  });
});
