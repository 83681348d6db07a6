export { createRouter, type Router } from './create-router';
export type { RouterOptions, RouterSettings } from './options';
export type { EventHandler, Handlers, HandlerContext, RoutedEvent, RouterStats, RouterEventName, RouterEventListener } from './types';
export { DEFAULT_TOPICS, defaultAggregateTypeOf, defaultDlqTopicFor } from './topics';
export { backoffDelay } from '../retry';
export { buildDeadLetter, type DeadLetterInput } from './dead-letter';
export { parseRecordHeaders, type RecordHeaders } from './record-headers';
export { createRouterMetrics, type RouterMetrics } from './metrics';
export { startHealthServer, type HealthServer, type HealthServerOptions } from './health-server';
