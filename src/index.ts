/**
 * outbox-router's library surface. The CLI (`outbox`) is built on the same exports.
 */
export {
  loadConfig,
  loadConfigWithSources,
  redactConfig,
  outboxConfigSchema,
  parse,
  type OutboxConfig,
  type OutboxOptions,
  type LoadConfigOptions,
  type ConfigSource,
  type LoadedConfig,
  type RouterConfig,
  type RelayConfig,
} from './config';
export { OutboxError, isOutboxError, ERROR_CODES, type ErrorCode } from './errors';
export { createLogger, type Logger } from './log';
export { provision, type ProvisionOptions, type ProvisionReport } from './provision';
export {
  createOutboxWriter,
  validateEvent,
  type OutboxEvent,
  type OutboxEventOf,
  type OutboxWriter,
  type OutboxWriterOptions,
  type PayloadEncoder,
  type WrittenEvent,
} from './producer';
export {
  createCodec,
  registerSchemas,
  checkSchemas,
  topicForReplacement,
  AVRO_CONTENT_TYPE,
  JSON_CONTENT_TYPE,
  type Codec,
  type CodecOptions,
  type ContentType,
  type EventMapShape,
  type ReaderSchemas,
} from './codec';
export { deployConnector, connectorStatus, deleteConnector, restartConnector, pauseConnector, resumeConnector, buildConnectorConfig } from './connector';
export { createRouter, type Router, type RouterOptions, type Handlers, type EventHandler, type BatchHandler, type EventTypeHandler, type HandlerContext, type RoutedEvent, type RouterStats, type RouterEventName, type RouterEventListener } from './router';
export { replayDeadLetters, releaseKeys, createRouterMetrics, startHealthServer, type PayloadSchema, type PayloadSchemas, type FailurePolicy } from './router';
export { createWatchdog, measureWatchdog, type Watchdog, type WatchdogOptions, type WatchdogEventName, type WatchdogListener } from './watchdog';
export { createRelay, createRelayMetrics, type Relay, type RelayOptions, type RelayStats, type RelayEventName, type RelayEventListener } from './relay';
export { collectStatus, renderStatus } from './status';
export { createKafka } from './kafka';
export { topicNames, type TopicNames } from './topics';
export { activeTraceparent, formatTraceparent, parseTraceparent, TRACER_NAME } from './tracing';
export { HEADER, DLQ_HEADER, OUTBOX_COLUMNS, SCHEMA_VERSION_HEADER, type RecordHeaders } from './envelope';
export {
  runService,
  createLifecycle,
  createEmitter,
  retryUntil,
  repeatUntilAborted,
  isLive,
  type RunnableService,
  type ServiceState,
  type ServiceStatus,
  type Lifecycle,
  type Emitter,
  type EventLevels,
} from './service';
