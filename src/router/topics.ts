/** How routed topic names map to aggregate types and dead-letter topics (DESIGN.md, "Topics and records"). */

export const DEFAULT_TOPICS = /^outbox\.event\..+/;
const EVENT_INFIX = 'outbox.event.';
const DLQ_INFIX = 'outbox.dlq.';

/**
 * `outbox.event.order` → `order`. A prefixed name (`staging.outbox.event.order`) works too: the aggregate
 * type is what follows the last `outbox.event.`; a topic without it yields its last dot-separated part.
 */
export function defaultAggregateTypeOf(topic: string): string {
  const at = topic.lastIndexOf(EVENT_INFIX);
  if (at >= 0 && topic.length > at + EVENT_INFIX.length) return topic.slice(at + EVENT_INFIX.length);
  return topic.slice(topic.lastIndexOf('.') + 1);
}

/**
 * `outbox.event.order` → `outbox.dlq.order`, keeping any prefix so the dead letters of a prefixed
 * deployment (or a test) stay next to its topics; otherwise `outbox.dlq.<aggregate_type>`.
 */
export function defaultDlqTopicFor(topic: string, aggregateType: string): string {
  const at = topic.lastIndexOf(EVENT_INFIX);
  if (at >= 0) return `${topic.slice(0, at)}${DLQ_INFIX}${topic.slice(at + EVENT_INFIX.length)}`;
  return `${DLQ_INFIX}${aggregateType}`;
}
