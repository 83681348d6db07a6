export { createRouter, type Router } from './create-router';
export { consumerName, LOCAL_STACK_CONSUMER, type RouterOptions, type RouterSettings } from './options';
export type { BatchHandler, EventHandler, EventTypeHandler, Handlers, HandlerContext, RoutedEvent, RouterStats, RouterEventName, RouterEventListener } from './types';
export { topicNames, type TopicNames } from '../topics';
export { backoffDelay } from '../retry';
export { buildDeadLetter, type DeadLetterInput } from './dead-letter';
export { parseRecordHeaders, type RecordHeaders } from './record-headers';
export { createRouterMetrics, type RouterMetrics } from './metrics';
export { startHealthServer, type HealthServer, type HealthServerOptions } from '../service/health-server';
export { DEFAULT_REPLAY_FOLLOW_MS, DEFAULT_REPLAY_TIMEOUT_MS, replayDeadLetters, type ReplayOptions, type ReplayReport, type ReplayedRecord, type StillParked, type StillParkedReason } from './replay';
export { parkedAgain, releaseKeys, type ReleaseTarget } from './parked';
export { REPLAY_HEADER, type FailurePolicy, type PayloadSchema, type PayloadSchemas } from './record-context';
export { laneOf } from './partition-batch';
// The inbox's housekeeping, as `outbox inbox:prune` and `outbox inbox:partition` run it (for a scheduler of your own, and the capacity bench).
export { pruneInbox, type PruneResult } from './inbox-retention';
export { prunePartitionedInbox, type PartitionDropResult } from './inbox-partitions';
export { convertInbox } from './inbox-convert';
