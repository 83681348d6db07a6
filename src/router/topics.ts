/** How routed topic names map to aggregate types and dead-letter topics (docs/operations.md, "The outbox table, topics and headers"). */
import { OutboxError } from '../errors';

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

/** Dead-letter names every topics pattern is checked against, whatever topics exist yet. */
export const SAMPLE_DLQ_TOPICS = [`${DLQ_INFIX}x`, `${DLQ_INFIX}order`];

export function isDlqTopic(topic: string): boolean {
  return topic.includes(DLQ_INFIX);
}

/**
 * Refuses a topics pattern that matches a dead-letter topic: the router would read its own dead letters,
 * apply (or dead-letter again) what was set aside, and loop. `candidates` are dead-letter names to check
 * besides the samples: the existing DLQ topics and the DLQ names of the routed topics.
 */
export function assertNotDlqPattern(pattern: RegExp, candidates: readonly string[] = []): void {
  const test = new RegExp(pattern.source, pattern.flags.replace(/[gy]/g, ''));
  const hits = [...new Set([...SAMPLE_DLQ_TOPICS, ...candidates])].filter((t) => test.test(t));
  if (hits.length === 0) return;
  throw new OutboxError(
    'CONFIG_INVALID',
    `The topics pattern ${String(pattern)} (--topics) matches dead-letter topics (${hits.slice(0, 5).join(', ')}): the router would consume its own dead letters. ` +
      `Narrow it to the routed topics, e.g. ${DEFAULT_TOPICS.source} (the default) or ^outbox\\.event\\.(order|payment)$.`,
    { details: { pattern: String(pattern), matches: hits } },
  );
}
