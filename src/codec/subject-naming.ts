/**
 * Subject naming: Confluent's TopicRecordNameStrategy, `<topic>-<record full name>`, e.g.
 * `outbox.event.order-dev.outboxrouter.order.OrderCreated`.
 *
 * Why this one: the Event Router puts every event type of an aggregate on one topic
 * (`outbox.event.<aggregate_type>`), so TopicNameStrategy (`<topic>-value`) would make OrderCancelled a
 * new *version* of OrderCreated and fail every compatibility check. RecordNameStrategy (`<full name>`)
 * would share one history across topics, so a test or second deployment with other topic names would
 * evolve the production subject. TopicRecordNameStrategy gives each (topic, event type) its own history,
 * and it is what Confluent's own serializers use with
 * `value.subject.name.strategy=io.confluent.kafka.serializers.subject.TopicRecordNameStrategy`, so
 * non-Node consumers find the same subjects.
 */
import { topicNames } from '../topics';

export type TopicFor = (aggregateType: string) => string;

/** `outbox.event.<aggregateType>`: the routed topic of the default replacement (src/topics). */
export const defaultTopicFor: TopicFor = topicNames().routed;

/** The connector's `route.topic.replacement` (`outbox.event.${routedByValue}`) as a TopicFor, so both agree. */
export function topicForReplacement(replacement: string): TopicFor {
  return topicNames(replacement).routed;
}

export function topicRecordSubject(topic: string, recordFullName: string): string {
  return `${topic}-${recordFullName}`;
}
