/**
 * Topic names, in one place (docs/operations.md, "The outbox table, topics and headers"). The connector's
 * `connector.topicReplacement` (`outbox.event.${routedByValue}` by default) decides the routed topic of an
 * aggregate type; everything else is derived from it here: the routed-topic pattern, the aggregate type
 * of a topic, the dead-letter topic. The codec (subject names), the relay, the router, `outbox status`,
 * the connector's topic guard and the DLQ commands all use these, so changing the replacement changes
 * them together. No Kafka client here: the writer may use it.
 */
import { OutboxError } from '../errors';

/** The Event Router's placeholder in `route.topic.replacement`: the row's aggregate_type. */
export const ROUTED_BY_VALUE = '${routedByValue}';
export const EVENT_INFIX = 'outbox.event.';
export const DLQ_INFIX = 'outbox.dlq.';
export const DEFAULT_TOPIC_REPLACEMENT = `${EVENT_INFIX}${ROUTED_BY_VALUE}`;

export interface TopicNames {
  /** The template, e.g. `outbox.event.${routedByValue}`. */
  readonly replacement: string;
  /** The dead-letter template: the replacement with its last `outbox.event.` → `outbox.dlq.` (else `outbox.dlq.${routedByValue}`). */
  readonly dlqReplacement: string;
  /** `order` → `outbox.event.order`: what the connector and the relay publish to. */
  routed(aggregateType: string): string;
  /** The routed topics, anchored (`^outbox\.event\..+$` by default); never matches a dead-letter topic. */
  readonly pattern: RegExp;
  /** The dead-letter topics, anchored (`^outbox\.dlq\..+$` by default). */
  readonly dlqPattern: RegExp;
  /** `outbox.event.order` → `order`; see aggregateTypeOf below for topics of other names. */
  aggregateTypeOf(topic: string): string;
  /** `outbox.event.order` → `outbox.dlq.order`. */
  dlqFor(topic: string, aggregateType?: string): string;
  /** `outbox.dlq.order` → `order`. */
  aggregateTypeOfDlq(dlqTopic: string): string;
  isDlq(topic: string): boolean;
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function fill(template: string, aggregateType: string): string {
  return template.split(ROUTED_BY_VALUE).join(aggregateType);
}

/** What a topic made from `template` holds in place of ${routedByValue}, or undefined if it is not one. */
function middle(template: string, topic: string): string | undefined {
  const at = template.indexOf(ROUTED_BY_VALUE);
  if (at < 0) return undefined;
  const before = template.slice(0, at);
  const after = template.slice(at + ROUTED_BY_VALUE.length);
  if (after.includes(ROUTED_BY_VALUE)) return undefined;
  if (topic.length <= before.length + after.length || !topic.startsWith(before) || !topic.endsWith(after)) return undefined;
  return topic.slice(before.length, topic.length - after.length);
}

function templatePattern(template: string, exclude?: string): RegExp {
  const [before, ...after] = template.split(ROUTED_BY_VALUE);
  const guard = exclude ? `(?!.*${escapeRegExp(exclude)})` : '';
  return new RegExp(`^${guard}${escapeRegExp(before ?? '')}.+${escapeRegExp(after.join(ROUTED_BY_VALUE))}$`);
}

/** The dead-letter template of a routed-topic template: a prefix (`staging.outbox.event.`) is kept. */
export function dlqReplacementFor(replacement: string): string {
  const at = replacement.lastIndexOf(EVENT_INFIX);
  if (at < 0) return `${DLQ_INFIX}${ROUTED_BY_VALUE}`;
  return `${replacement.slice(0, at)}${DLQ_INFIX}${replacement.slice(at + EVENT_INFIX.length)}`;
}

/**
 * The names for one `connector.topicReplacement`. Topics that are not made from the template (a test's
 * or a second deployment's `staging.outbox.event.order`, consumed with an explicit pattern) still work:
 * the aggregate type is what follows the last `outbox.event.` (else the last dot-separated part), and
 * the dead-letter topic replaces that `outbox.event.` with `outbox.dlq.`, keeping the prefix.
 */
export function topicNames(replacement: string = DEFAULT_TOPIC_REPLACEMENT): TopicNames {
  const dlqReplacement = dlqReplacementFor(replacement);
  const isDlq = (topic: string) => topic.includes(DLQ_INFIX);
  const plain = templatePattern(replacement);
  // A template like `${routedByValue}` alone would match dead letters too: keep them out.
  const pattern = plain.test(fill(dlqReplacement, 'x')) ? templatePattern(replacement, DLQ_INFIX) : plain;

  const aggregateTypeOf = (topic: string): string => {
    const inTemplate = isDlq(topic) ? undefined : middle(replacement, topic);
    if (inTemplate !== undefined) return inTemplate;
    const at = topic.lastIndexOf(EVENT_INFIX);
    if (at >= 0 && topic.length > at + EVENT_INFIX.length) return topic.slice(at + EVENT_INFIX.length);
    return topic.slice(topic.lastIndexOf('.') + 1);
  };

  return Object.freeze({
    replacement,
    dlqReplacement,
    routed: (aggregateType: string) => fill(replacement, aggregateType),
    pattern,
    dlqPattern: templatePattern(dlqReplacement),
    aggregateTypeOf,
    dlqFor(topic: string, aggregateType: string = aggregateTypeOf(topic)): string {
      // Named from the topic itself, as the connector named it, whatever a custom aggregateTypeOf says.
      const inTemplate = isDlq(topic) ? undefined : middle(replacement, topic);
      if (inTemplate !== undefined) return fill(dlqReplacement, inTemplate);
      const at = topic.lastIndexOf(EVENT_INFIX);
      if (at >= 0) return `${topic.slice(0, at)}${DLQ_INFIX}${topic.slice(at + EVENT_INFIX.length)}`;
      return fill(`${DLQ_INFIX}${ROUTED_BY_VALUE}`, aggregateType);
    },
    aggregateTypeOfDlq(dlqTopic: string): string {
      const inTemplate = middle(dlqReplacement, dlqTopic);
      if (inTemplate !== undefined) return inTemplate;
      const at = dlqTopic.lastIndexOf(DLQ_INFIX);
      if (at >= 0 && dlqTopic.length > at + DLQ_INFIX.length) return dlqTopic.slice(at + DLQ_INFIX.length);
      return dlqTopic.slice(dlqTopic.lastIndexOf('.') + 1);
    },
    isDlq,
  });
}

/**
 * A pattern that matches exactly these topic names (each escaped, so a `.` or `+` in an aggregate type
 * is itself): how the router's default subscription (the topics of the handlers' aggregate types) is
 * shown and checked like any other pattern. No names: a pattern that matches nothing.
 */
export function exactTopicsPattern(topics: readonly string[]): RegExp {
  return topics.length === 0 ? /(?!)/ : new RegExp(`^(?:${[...new Set(topics)].sort().map(escapeRegExp).join('|')})$`);
}

/** Dead-letter names every topics pattern is checked against, whatever topics exist yet. */
export const SAMPLE_DLQ_TOPICS = [`${DLQ_INFIX}x`, `${DLQ_INFIX}order`];

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
    'TOPIC_PATTERN_INVALID',
    `The topics pattern ${String(pattern)} (--topics) matches dead-letter topics (${hits.slice(0, 5).join(', ')}): the router would consume its own dead letters. ` +
      `Narrow it to the routed topics, e.g. ${topicNames().pattern.source} or ^outbox\\.event\\.(order|payment)$, or leave it out: by default the router reads the routed topics of its handlers' aggregate types.`,
    { details: { pattern: String(pattern), matches: hits } },
  );
}
