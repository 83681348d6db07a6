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
export { firingAlerts, targetsLocalStack, topicLag } from './sections';
export * from './types';
