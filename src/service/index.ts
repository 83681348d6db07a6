export { createLifecycle, type Lifecycle, type LifecycleHooks, type ServiceState, type ServiceStatus } from './lifecycle';
export { createEmitter, type Emitter, type EmitterOptions, type EventLevel, type EventLevels, type EventListener } from './emitter';
export { retryUntil, type RetryUntilOptions, type RetryUntilResult } from './retry-until';
export { repeatUntilAborted } from './repeat';
export { startHealthServer, HEALTH_PATHS, type HealthServer, type HealthServerOptions } from './health-server';
export { collectProcessMetrics } from './process-metrics';
export { createServiceSet, mergeExpositions, type ServiceMember, type ServiceSet, type ServiceSetOptions } from './service-set';
export { runService, isLive, type RunnableService, type RunServiceOptions } from './run-service';
