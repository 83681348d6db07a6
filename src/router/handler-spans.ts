import { context, SpanKind, SpanStatusCode, trace, type Attributes, type Link, type Span } from '@opentelemetry/api';
import { HEADER, headerText } from '../envelope';
import { ATTR, parseTraceparent, tracer } from '../tracing';
import { type Failure, type Ready, type Where } from './record-context';

/**
 * The router's consumer spans (docs/tracing.md). One span per handler call: a per-event handler's span
 * continues the event's `traceparent` (its parent is the writer's span); a batch handler's call over
 * several events is one span with a link to each event's context, since one span cannot have several
 * parents. A record dead-lettered without its handler running (undecodable, no handler, key parked)
 * gets a span too, so its trace says where it went. Without a registered SDK every span is a no-op.
 */

/** What became of the record(s) after this try: the span's `outbox.outcome`. */
export type SpanOutcome = 'applied' | 'retry' | 'rolled-back' | 'dead-lettered' | 'aborted';

interface Entry {
  span: Span;
  /** The handler threw: the exception is on the span already. */
  failed: boolean;
}

/** The spans of one inbox transaction's handler calls, ended together once the transaction's outcome is known. */
export class HandlerSpans {
  private readonly entries: Entry[] = [];
  private ended = false;

  constructor(
    private readonly consumer: string,
    private readonly attempt = 1,
  ) {}

  /** A span for a record given up on before any handler ran; ended by `end`. */
  static withoutHandler(where: Where, eventId: string | undefined, consumer: string): HandlerSpans {
    const spans = new HandlerSpans(consumer);
    const eventType = headerText(where.message.headers, HEADER.eventType);
    const span = tracer().startSpan(spanName(where.aggregateType, eventType), CONSUMER, remoteContext(headerText(where.message.headers, HEADER.traceparent)));
    if (span.isRecording()) span.setAttributes(recordAttributes(where, consumer, eventId, eventType, 1));
    spans.entries.push({ span, failed: false });
    return spans;
  }

  /** Runs one handler call inside its span, the span active in the handler's context (its own spans nest under it). */
  run(items: readonly Ready[], call: () => Promise<void>): Promise<void> {
    const span = this.start(items);
    const entry: Entry = { span, failed: false };
    this.entries.push(entry);
    return context.with(trace.setSpan(context.active(), span), call).catch((error: unknown) => {
      entry.failed = true;
      if (!this.ended) recordError(span, error);
      throw error;
    });
  }

  /**
   * Ends every span with the outcome. `error`: why the try failed, recorded on the spans whose own handler
   * did not throw (a failed COMMIT, the database gone); `deadLetter`: the record's dead letter.
   */
  end(outcome: SpanOutcome, error?: unknown, deadLetter?: { failure: Failure; topic: string }): void {
    if (this.ended) return;
    this.ended = true;
    for (const { span, failed } of this.entries) {
      if (!span.isRecording()) {
        span.end();
        continue;
      }
      span.setAttribute(ATTR.outcome, outcome);
      if (deadLetter) {
        span.setAttributes({ [ATTR.deadLetterCode]: String(deadLetter.failure.code), [ATTR.deadLetterTopic]: deadLetter.topic });
        if (!failed && error === undefined) recordError(span, { name: String(deadLetter.failure.code), message: deadLetter.failure.message });
      }
      if (error !== undefined && !failed) recordError(span, error);
      span.end();
    }
  }

  /**
   * Attributes and links are set on a started span, and only when it records: building them costs more
   * than the rest of a no-op span, and without an SDK nothing records. (A sampler therefore sees the
   * name, kind and parent only.)
   */
  private start(items: readonly Ready[]): Span {
    const first = items[0] as Ready;
    if (items.length === 1) {
      const span = tracer().startSpan(spanName(first.aggregateType, first.event.type), CONSUMER, remoteContext(first.event.traceparent));
      if (span.isRecording()) span.setAttributes(recordAttributes(first, this.consumer, first.event.id, first.event.type, this.attempt));
      return span;
    }
    const eventType = items.every((i) => i.event.type === first.event.type) ? first.event.type : undefined;
    // A batch has no one parent: a new trace (under whatever the router's own context holds), linked to each event's.
    const span = tracer().startSpan(spanName(first.aggregateType, eventType), CONSUMER, context.active());
    if (!span.isRecording()) return span;
    const attributes = destinationAttributes(first, this.consumer);
    if (eventType !== undefined) attributes[ATTR.eventType] = eventType;
    attributes[ATTR.batchCount] = items.length;
    attributes[ATTR.attempt] = this.attempt;
    span.setAttributes(attributes);
    const links: Link[] = [];
    for (const item of items) {
      const linked = parseTraceparent(item.event.traceparent);
      if (linked) {
        links.push({
          context: linked,
          attributes: { [ATTR.messageId]: item.event.id, [ATTR.kafkaOffset]: Number(item.message.offset), [ATTR.kafkaKey]: item.key, [ATTR.eventType]: item.event.type },
        });
      }
    }
    span.addLinks(links);
    return span;
  }
}

const CONSUMER = { kind: SpanKind.CONSUMER } as const;

/** `<aggregateType>.<eventType> process`, or `<aggregateType> process` for a batch of several types or an unreadable record. */
function spanName(aggregateType: string, eventType: string | undefined): string {
  return `${aggregateType}${eventType === undefined ? '' : `.${eventType}`} process`;
}

/** The context whose span is the writer's (remote) span, or the active one when the record carries no valid traceparent. */
function remoteContext(traceparent: string | undefined) {
  const remote = parseTraceparent(traceparent);
  return remote ? trace.setSpanContext(context.active(), remote) : context.active();
}

function destinationAttributes(where: Where, consumer: string): Attributes {
  return {
    [ATTR.messagingSystem]: 'kafka',
    [ATTR.operationType]: 'process',
    [ATTR.operationName]: 'process',
    [ATTR.destination]: where.topic,
    [ATTR.partition]: String(where.partition),
    [ATTR.consumer]: consumer,
    [ATTR.aggregateType]: where.aggregateType,
  };
}

function recordAttributes(where: Where, consumer: string, eventId: string | undefined, eventType: string | undefined, attempt: number): Attributes {
  const attributes = destinationAttributes(where, consumer);
  attributes[ATTR.kafkaKey] = where.key;
  attributes[ATTR.kafkaOffset] = Number(where.message.offset);
  attributes[ATTR.aggregateId] = where.key;
  if (eventId !== undefined) attributes[ATTR.messageId] = eventId;
  if (eventType !== undefined) attributes[ATTR.eventType] = eventType;
  attributes[ATTR.attempt] = attempt;
  return attributes;
}

function recordError(span: Span, error: unknown): void {
  const exception = error instanceof Error ? error : { name: String((error as { name?: unknown })?.name ?? 'Error'), message: String((error as { message?: unknown })?.message ?? error) };
  span.recordException(exception);
  span.setStatus({ code: SpanStatusCode.ERROR, message: exception.message });
}
