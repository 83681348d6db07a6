export {
  buildConnectorConfig,
  debeziumNameProblems,
  connectorBuildOptionsSchema,
  heartbeatQuery,
  outboxSourceTopic,
  CONNECTOR_TEMPLATE,
  desiredConnectorConfig,
  type DesiredConnectorOptions,
  type ConnectorBuildOptions,
  type ConnectorConfig,
} from './build-config';
export { diffConfigs, formatDiff, redactConnectorConfig, type ConfigDiff } from './config-diff';
export {
  createConnectClient,
  type ConnectClient,
  type ConnectClientOptions,
  type ConnectorOffset,
  type ConnectorState,
  type ConnectorStatusInfo,
  type FieldErrors,
  type HttpFn,
  type HttpRequest,
  type HttpResponse,
} from './connect-client';
export { deployConnector, type DeployOptions, type DeployProgress, type DeployResult } from './deploy';
export { debeziumTopicName, javaRegexLiteral, quoteIdent } from './escape';
export {
  connectorStatus,
  deleteConnector,
  pauseConnector,
  restartConnector,
  resumeConnector,
  type ConnectorStatusReport,
  type DeleteOptions,
  type DeleteResult,
  type OperationOptions,
} from './operations';
export { switchToRelay, type SwitchToRelayOptions, type SwitchToRelayReport } from './switch-to-relay';
export { DEFAULT_PEEK_TIMEOUT_MS, widenXid } from './slot-peek';
export { checkPublication, judgePublication, PUBLICATION_CHECK_SQL, PUBLICATION_FIX, type PublicationCheck, type PublicationTarget } from './publication-check';
export { slotGuard, parseLsn, type GuardFinding, type SlotInfo } from './slot-guard';
export {
  connectorRequestBody,
  renderConnector,
  strimziConnectorResource,
  strimziPasswordRef,
  strimziOptionsSchema,
  RENDER_FORMATS,
  STRIMZI_FLAGS,
  STRIMZI_MANAGED_KEYS,
  type ConnectorRequestBody,
  type KafkaConnectorResource,
  type RenderFormat,
  type RenderOptions,
  type StrimziOptions,
} from './render';
export { growTopics, type GrowOptions, type GrowReport } from './grow';
