/**
 * OpenTelemetry tracing (docs/tracing.md): the W3C traceparent the writer stores and the router
 * continues, and the names of the span attributes. Only @opentelemetry/api: without a registered SDK
 * every call is a no-op.
 */
import { trace, type Tracer } from '@opentelemetry/api';

export { activeTraceparent, formatTraceparent, parseTraceparent } from './traceparent';

/** The instrumentation scope of every span the library starts. */
export const TRACER_NAME = 'outbox-router';

/**
 * The library's tracer. Taken per use, not cached: the API hands out a proxy that follows a provider
 * registered later, but an application that swaps the global provider (tests do) gets the new one.
 */
export function tracer(): Tracer {
  return trace.getTracer(TRACER_NAME);
}

/**
 * Span attribute names: OpenTelemetry's messaging semantic conventions where one exists (written out,
 * not imported: @opentelemetry/semantic-conventions marks the messaging ones incubating), `outbox.*` for
 * what only this pipeline has.
 */
export const ATTR = {
  messagingSystem: 'messaging.system',
  operationType: 'messaging.operation.type',
  operationName: 'messaging.operation.name',
  destination: 'messaging.destination.name',
  partition: 'messaging.destination.partition.id',
  messageId: 'messaging.message.id',
  kafkaKey: 'messaging.kafka.message.key',
  kafkaOffset: 'messaging.kafka.offset',
  batchCount: 'messaging.batch.message_count',
  /** The router's inbox consumer name (its Kafka group id unless set apart). */
  consumer: 'outbox.consumer',
  aggregateType: 'outbox.aggregate.type',
  aggregateId: 'outbox.aggregate.id',
  eventType: 'outbox.event.type',
  /** The try of this record (1 on the first); a chunk's shared transaction counts as a first try. */
  attempt: 'outbox.attempt',
  /** What became of the record after this try: see docs/tracing.md. */
  outcome: 'outbox.outcome',
  deadLetterCode: 'outbox.dead_letter.code',
  deadLetterTopic: 'outbox.dead_letter.topic',
} as const;
