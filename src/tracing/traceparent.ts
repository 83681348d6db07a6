import { context, INVALID_SPANID as INVALID_SPAN_ID, INVALID_TRACEID as INVALID_TRACE_ID, isSpanContextValid, trace, type SpanContext } from '@opentelemetry/api';

/**
 * The W3C `traceparent` header (version 00: `00-<trace id>-<span id>-<flags>`), formatted and parsed
 * here rather than with @opentelemetry/core's W3CTraceContextPropagator: the library depends on
 * @opentelemetry/api alone, so that it traces with whatever SDK the application registers and costs
 * nothing without one. The record header and the outbox column carry this text (src/envelope).
 */
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(?:-|$)/;

/** `00-<traceId>-<spanId>-<flags>`, or undefined for an invalid (all-zero) context. */
export function formatTraceparent(spanContext: SpanContext): string | undefined {
  if (!isSpanContextValid(spanContext)) return undefined;
  return `00-${spanContext.traceId}-${spanContext.spanId}-${(spanContext.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/**
 * The remote span context a traceparent names; undefined when it is not one (a malformed value, version
 * ff, all-zero ids): the consumer then starts a new trace instead of failing the record. A future
 * version may append fields after the flags (W3C: parse the first four, ignore the rest); version 00 may not.
 */
export function parseTraceparent(text: string | undefined): SpanContext | undefined {
  // Slices of a tested string, not capture groups: the router parses one per record.
  if (text === undefined || text.length < 55 || !TRACEPARENT.test(text)) return undefined;
  const version = text.slice(0, 2);
  if (version === 'ff' || (version === '00' && text.length !== 55)) return undefined;
  const traceId = text.slice(3, 35);
  const spanId = text.slice(36, 52);
  // The pattern checked the hex digits; all-zero ids are the one invalid value left.
  if (traceId === INVALID_TRACE_ID || spanId === INVALID_SPAN_ID) return undefined;
  return { traceId, spanId, traceFlags: parseInt(text.slice(53, 55), 16), isRemote: true };
}

/** The traceparent of the span active in the current context, or undefined when none is (or no SDK is registered). */
export function activeTraceparent(): string | undefined {
  const spanContext = trace.getSpanContext(context.active());
  return spanContext === undefined ? undefined : formatTraceparent(spanContext);
}
