/**
 * src/tracing/traceparent.ts: the W3C traceparent formatted from a span context and parsed back, and
 * the no-SDK case: with @opentelemetry/api alone (no provider, no context manager registered in this
 * file) nothing is active, the writer stores no traceparent, and the router's spans record nothing.
 */
import { context, trace, TraceFlags, type SpanContext } from '@opentelemetry/api';
import type { ClientBase } from 'pg';
import { loadConfig } from '../../../src/config';
import { createOutboxWriter } from '../../../src/producer';
import { activeTraceparent, formatTraceparent, parseTraceparent } from '../../../src/tracing';
import { fakeDeps, routeOne } from '../router/fake-deps';

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const SPAN_ID = 'b7ad6b7169203331';

describe('formatTraceparent', () => {
  it('writes version 00, the ids and the flags as two hex digits', () => {
    expect(formatTraceparent({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: TraceFlags.SAMPLED })).toBe(`00-${TRACE_ID}-${SPAN_ID}-01`);
    expect(formatTraceparent({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: TraceFlags.NONE })).toBe(`00-${TRACE_ID}-${SPAN_ID}-00`);
  });

  it('gives nothing for an invalid context (all-zero ids: what a no-op span has)', () => {
    expect(formatTraceparent({ traceId: '0'.repeat(32), spanId: SPAN_ID, traceFlags: 1 })).toBeUndefined();
    expect(formatTraceparent(trace.wrapSpanContext({ traceId: TRACE_ID, spanId: '0'.repeat(16), traceFlags: 1 }).spanContext())).toBeUndefined();
  });
});

describe('parseTraceparent', () => {
  it('reads back what formatTraceparent writes, as a remote context', () => {
    const spanContext: SpanContext = { traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1 };
    expect(parseTraceparent(formatTraceparent(spanContext))).toEqual({ ...spanContext, isRemote: true });
  });

  it('refuses malformed values, version ff, all-zero ids and extra fields on version 00', () => {
    for (const bad of [undefined, '', 'garbage', `00-${TRACE_ID}-${SPAN_ID}`, `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01`, `ff-${TRACE_ID}-${SPAN_ID}-01`, `00-${'0'.repeat(32)}-${SPAN_ID}-01`, `00-${TRACE_ID}-${'0'.repeat(16)}-01`, `00-${TRACE_ID}-${SPAN_ID}-01-extra`]) {
      expect([bad, parseTraceparent(bad)]).toEqual([bad, undefined]);
    }
  });

  it('takes the first four fields of a later version', () => {
    expect(parseTraceparent(`01-${TRACE_ID}-${SPAN_ID}-01-more`)).toMatchObject({ traceId: TRACE_ID, spanId: SPAN_ID });
  });
});

describe('without an OpenTelemetry SDK', () => {
  const span = trace.wrapSpanContext({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1 });

  it('nothing is active: no context manager keeps the span, activeTraceparent is undefined', () => {
    context.with(trace.setSpan(context.active(), span), () => expect(activeTraceparent()).toBeUndefined());
    expect(trace.getTracer('x').startSpan('s').isRecording()).toBe(false);
  });

  it("the writer (traceContext 'active', the default) stores NULL, and a hand-passed traceparent as given", async () => {
    const query = jest.fn(async (_text: string, _values?: unknown[]) => ({ rows: [], rowCount: 0 }));
    const client = { query, getTransactionStatus: () => 'T' } as unknown as ClientBase;
    const writer = createOutboxWriter({ outbox: loadConfig({ env: {}, overrides: {} }).outbox, codec: { encode: async () => Buffer.from('{}') }, contentType: 'application/json' });
    const base = { aggregateType: 'order', aggregateId: 'o-1', type: 'OrderCreated', payload: {} };
    await context.with(trace.setSpan(context.active(), span), () => writer.writeEvents(client, [base, { ...base, traceparent: `00-${TRACE_ID}-${SPAN_ID}-01` }]));
    const values = query.mock.calls[0]?.[1] as unknown[];
    expect([values[6], values[14]]).toEqual([null, `00-${TRACE_ID}-${SPAN_ID}-01`]);
  });

  it('the router handles and dead-letters as before (its spans are no-ops)', async () => {
    const headers = { id: '00000000-0000-4000-8000-000000000001', eventType: 'OrderCreated', contentType: 'application/json', traceparent: `00-${TRACE_ID}-${SPAN_ID}-01` };
    const message = (offset: string) => ({ key: Buffer.from('o-1'), value: Buffer.from('{}'), headers: { ...headers, id: headers.id.replace(/1$/, offset) }, offset, timestamp: '0', attributes: 0 });
    const seen: string[] = [];
    const ok = fakeDeps({ handlers: { order: { OrderCreated: async (event) => void seen.push(event.traceparent as string) } } });
    expect(await routeOne('outbox.event.order', 0, message('1'), ok.d)).toBe('applied');
    expect(seen).toEqual([headers.traceparent]);
    const failing = fakeDeps({ maxAttempts: 1, handlers: { order: { OrderCreated: async () => Promise.reject(new Error('boom')) } } });
    expect(await routeOne('outbox.event.order', 0, message('2'), failing.d)).toBe('dead-lettered');
  });
});
