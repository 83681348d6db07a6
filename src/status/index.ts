export {
  collectStatus,
  dlqTopicPattern,
  routedTopicPattern,
  DEFAULT_GROUP,
  DEFAULT_LAG_WARN,
  DEFAULT_STATUS_TIMEOUT_MS,
  DEFAULT_WATCHDOG_URL,
  watchdogUrlOf,
  type StatusOptions,
} from './collect';
export { renderStatus, type RenderOptions } from './render';
export { computeVerdict, type VerdictInput } from './verdict';
export { formatBytes } from './format';
export { DEFAULT_PARKED_LIMIT, parkedSql } from './parked';
export { DEFAULT_OUTBOX_WARN_AGE_MS, DEFAULT_OUTBOX_WARN_BYTES, readOutboxTable } from './outbox-table';
export { firingAlerts, targetsLocalStack, topicLag } from './sections';
export * from './types';
