/**
 * Tracing with an SDK registered (in memory, test/support/tracing.ts): the writer stores the active
 * span's traceparent; the router's handler span continues it, with the messaging attributes, the
 * handler's error, and the dead-letter outcome; a batch handler's call is one span linking each event.
 */
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { KafkaMessage } from 'kafkajs';
import type { ClientBase } from 'pg';
import { loadConfig } from '../../../src/config';
import { createOutboxWriter } from '../../../src/producer';
import { runPartitionBatch } from '../../../src/router/partition-batch';
import type { Handlers } from '../../../src/router/types';
import { TRACER_NAME } from '../../../src/tracing';
import { registerTestTracing, type TestTracing } from '../../support/tracing';
import { fakeDeps, routeOne } from '../router/fake-deps';

let tracing: TestTracing;
beforeAll(() => (tracing = registerTestTracing()));
afterAll(() => tracing.shutdown());
beforeEach(() => tracing.exporter.reset());

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const SPAN_ID = 'b7ad6b7169203331';
const ID = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

function message(n: number, patch: { eventType?: string; traceparent?: string } = {}): KafkaMessage {
  const traceparent = patch.traceparent ?? `00-${TRACE_ID}-${SPAN_ID.slice(0, 14)}${String(n).padStart(2, '0')}-01`;
  return {
    key: Buffer.from(`o-${n}`),
    value: Buffer.from(JSON.stringify({ n })),
    headers: { id: ID(n), eventType: patch.eventType ?? 'OrderCreated', contentType: 'application/json', traceparent },
    offset: String(100 + n),
    timestamp: '0',
    attributes: 0,
  } as KafkaMessage;
}

describe('the writer', () => {
  function writerAndClient(traceContext?: 'active' | 'off') {
    const query = jest.fn(async (_text: string, _values?: unknown[]) => ({ rows: [], rowCount: 0 }));
    const client = { query, getTransactionStatus: () => 'T' } as unknown as ClientBase;
    const writer = createOutboxWriter({ outbox: loadConfig({ env: {}, overrides: {} }).outbox, codec: { encode: async () => Buffer.from('{}') }, contentType: 'application/json', traceContext });
    return { writer, client, traceparents: () => (query.mock.calls[0]?.[1] as unknown[]).filter((_, i) => i % 8 === 6) };
  }
  const event = { aggregateType: 'order', aggregateId: 'o-1', type: 'OrderCreated', payload: {} };

  it("stores the active span's traceparent for an event without one; a hand-passed one wins", async () => {
    const { writer, client, traceparents } = writerAndClient();
    const given = `00-${TRACE_ID}-${SPAN_ID}-01`;
    const spanContext = await trace.getTracer('test').startActiveSpan('create-order', async (span) => {
      await writer.writeEvents(client, [event, { ...event, traceparent: given }]);
      span.end();
      return span.spanContext();
    });
    expect(traceparents()).toEqual([`00-${spanContext.traceId}-${spanContext.spanId}-01`, given]);
  });

  it("stores nothing outside a span, and nothing with traceContext 'off'", async () => {
    const outside = writerAndClient();
    await outside.writer.writeEvent(outside.client, event);
    expect(outside.traceparents()).toEqual([null]);
    const off = writerAndClient('off');
    await trace.getTracer('test').startActiveSpan('create-order', async (span) => {
      await off.writer.writeEvent(off.client, event);
      span.end();
    });
    expect(off.traceparents()).toEqual([null]);
  });

  it('refuses an unknown traceContext', () => {
    expect(() => writerAndClient('on' as 'off')).toThrow(/traceContext must be 'active' or 'off'/);
  });
});

describe('the router', () => {
  it('runs a handler in a consumer span continuing the event trace, with the messaging attributes', async () => {
    let active: string | undefined;
    const { d } = fakeDeps({ handlers: { order: { OrderCreated: async () => void (active = trace.getActiveSpan()?.spanContext().spanId) } } });
    expect(await routeOne('outbox.event.order', 3, message(7), d)).toBe('applied');
    const [span] = tracing.spans();
    expect(span?.name).toBe('order.OrderCreated process');
    expect(span?.kind).toBe(SpanKind.CONSUMER);
    expect(span?.instrumentationScope.name).toBe(TRACER_NAME);
    expect(span?.spanContext().traceId).toBe(TRACE_ID);
    expect(tracing.parentOf(span!)).toBe(`${SPAN_ID.slice(0, 14)}07`);
    // The handler's own work nests under the span.
    expect(active).toBe(span?.spanContext().spanId);
    expect(span?.attributes).toEqual({
      'messaging.system': 'kafka',
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.destination.name': 'outbox.event.order',
      'messaging.destination.partition.id': '3',
      'messaging.kafka.message.key': 'o-7',
      'messaging.kafka.offset': 107,
      'messaging.message.id': ID(7),
      'outbox.consumer': 'c',
      'outbox.aggregate.type': 'order',
      'outbox.aggregate.id': 'o-7',
      'outbox.event.type': 'OrderCreated',
      'outbox.attempt': 1,
      'outbox.outcome': 'applied',
    });
    expect(span?.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('a record without a traceparent starts a new trace', async () => {
    const { d } = fakeDeps();
    await routeOne('outbox.event.order', 0, message(1, { traceparent: 'not-one' }), d);
    const [span] = tracing.spans();
    expect(span?.spanContext().traceId).not.toBe(TRACE_ID);
    expect(tracing.parentOf(span!)).toBe('');
  });

  it('a failing handler: one span per try with its exception, the last one dead-lettered', async () => {
    const { d } = fakeDeps({ maxAttempts: 2, handlers: { order: { OrderCreated: async () => Promise.reject(new Error('card declined')) } } });
    expect(await routeOne('outbox.event.order', 0, message(2), d)).toBe('dead-lettered');
    const spans = tracing.spans();
    expect(spans.map((s) => [s.attributes['outbox.attempt'], s.attributes['outbox.outcome'], s.status.code, s.status.message])).toEqual([
      [1, 'retry', SpanStatusCode.ERROR, 'card declined'],
      [2, 'dead-lettered', SpanStatusCode.ERROR, 'card declined'],
    ]);
    expect(spans.map((s) => s.events.map((e) => [e.name, e.attributes?.['exception.message']]))).toEqual([[['exception', 'card declined']], [['exception', 'card declined']]]);
    expect(spans[1]?.attributes).toMatchObject({ 'outbox.dead_letter.code': 'HANDLER_FAILED', 'outbox.dead_letter.topic': 'outbox.dlq.order' });
    expect(spans.every((s) => s.spanContext().traceId === TRACE_ID)).toBe(true);
  });

  it('a record dead-lettered before any handler runs still gets its span, saying why', async () => {
    const { d } = fakeDeps();
    expect(await routeOne('outbox.event.order', 0, message(4, { eventType: 'OrderLost' }), d)).toBe('dead-lettered');
    const [span] = tracing.spans();
    expect(span?.name).toBe('order.OrderLost process');
    expect(span?.spanContext().traceId).toBe(TRACE_ID);
    expect(span?.attributes).toMatchObject({ 'outbox.outcome': 'dead-lettered', 'outbox.dead_letter.code': 'HANDLER_NOT_FOUND', 'messaging.message.id': ID(4) });
    expect(span?.status.code).toBe(SpanStatusCode.ERROR);
  });

  it('a batch handler call is one span linking each event context; a chunk that fails leaves rolled-back spans and retries alone', async () => {
    const handlers: Handlers = { order: { OrderCreated: { batch: async () => {} } } };
    const { d } = fakeDeps({ handlers });
    await runPartitionBatch('outbox.event.order', 1, [1, 2, 3].map((n) => message(n)), d, d, { lanes: 1, maxTransactionRecords: 10, resolveOffset: () => {}, progress: async () => {}, stopped: () => false, revoked: () => false });
    const [span] = tracing.spans();
    expect(tracing.spans()).toHaveLength(1);
    expect(span?.name).toBe('order.OrderCreated process');
    expect(span?.attributes).toMatchObject({ 'messaging.batch.message_count': 3, 'messaging.destination.partition.id': '1', 'outbox.outcome': 'applied' });
    expect(span?.links.map((l) => [l.context.spanId, l.attributes?.['messaging.message.id'], l.attributes?.['messaging.kafka.offset']])).toEqual(
      [1, 2, 3].map((n) => [`${SPAN_ID.slice(0, 14)}0${n}`, ID(n), 100 + n]),
    );

    tracing.exporter.reset();
    let calls = 0;
    const flaky = fakeDeps({ handlers: { order: { OrderCreated: async () => {
            if (calls++ === 1) throw new Error('once');
          } } } });
    await runPartitionBatch('outbox.event.order', 1, [5, 6].map((n) => message(n)), flaky.d, flaky.d, { lanes: 1, maxTransactionRecords: 10, resolveOffset: () => {}, progress: async () => {}, stopped: () => false, revoked: () => false });
    expect(tracing.spans().map((s) => [s.attributes['messaging.message.id'], s.attributes['outbox.outcome'], s.status.code])).toEqual([
      [ID(5), 'rolled-back', SpanStatusCode.UNSET],
      [ID(6), 'rolled-back', SpanStatusCode.ERROR],
      [ID(5), 'applied', SpanStatusCode.UNSET],
      [ID(6), 'applied', SpanStatusCode.UNSET],
    ]);
  });
});
