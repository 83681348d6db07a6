/** The router's default topic naming: the names of the default `connector.topicReplacement` (src/topics). */
import { topicNames } from '../topics';

export { assertNotDlqPattern, SAMPLE_DLQ_TOPICS } from '../topics';

const names = topicNames();

/** `/^outbox\.event\..+$/`: the routed topics of the default replacement. */
export const DEFAULT_TOPICS = names.pattern;
/** `outbox.event.order` → `order`; a prefixed `staging.outbox.event.order` too. */
export const defaultAggregateTypeOf = names.aggregateTypeOf;
/** `outbox.event.order` → `outbox.dlq.order`, keeping any prefix. */
export const defaultDlqTopicFor: (topic: string, aggregateType: string) => string = names.dlqFor;
export const isDlqTopic = names.isDlq;
