/**
 * The local stack's contract: ports and versions shared by the native stack, docker-compose.yml,
 * the test harness and every command's defaults. Change a value here and the unit tests check that
 * docker-compose.yml and the Maven poms still agree.
 */
export { STACK_HOST, STACK_PORTS, LOCAL_ROLE_PASSWORDS, REGISTRY_CCOMPAT_PATH, stackUrls } from 'outbox-router/local-stack';
import { LOCAL_POSTGRES } from 'outbox-router/local-stack';

export const STACK_VERSIONS = Object.freeze({
  // Not 4.4: Debezium 3.6.1 calls org.apache.kafka.common.utils.Sanitizer, which 4.4 removed (its tasks fail
  // with NoClassDefFoundError). 4.3.1 is what Debezium's own 3.6 images ship.
  kafka: '4.3.1',
  debezium: '3.6.1.Final',
  apicurio: '3.3.3',
  log4j: '2.25.5',
  slf4j: '2.0.17',
  /** Minimum server version; the native stack uses the newest one Debian's packages installed. */
  postgresMin: 13,
});

export const POSTGRES = Object.freeze({
  ...LOCAL_POSTGRES,
  walLevel: 'logical',
  /** Several connectors plus the slot tests of every suite running at once. */
  maxReplicationSlots: 32,
  maxWalSenders: 32,
  maxConnections: 200,
});

export const KAFKA = Object.freeze({
  /** A fixed KRaft cluster id (22-char base64url UUID) so `format --ignore-formatted` is idempotent. */
  clusterId: 'b3V0Ym94LXJvdXRlci0xAQ',
  connectGroupId: 'outbox-connect',
  connectConfigTopic: '_connect-configs',
  connectOffsetTopic: '_connect-offsets',
  connectStatusTopic: '_connect-status',
});

export const REGISTRY_GLOBAL_COMPATIBILITY = 'BACKWARD';

/**
 * The registry keeps its schemas in the stack's PostgreSQL, in a database of its own (Apicurio's SQL
 * storage; its distribution ships the PostgreSQL JDBC driver). In memory, every `stack down`/`up` lost
 * them: writes failed with SCHEMA_NOT_REGISTERED and records already on Kafka became DECODE_FAILED dead
 * letters. `stack down --clean` removes the cluster, and with it the schemas.
 */
export const REGISTRY_DATABASE = 'apicurio_registry';

/** Classes Connect must list before the stack counts as ready. */
export const DEBEZIUM_PLUGIN_CLASSES = Object.freeze([
  'io.debezium.connector.postgresql.PostgresConnector',
  'io.debezium.transforms.outbox.EventRouter',
  'io.debezium.converters.BinaryDataConverter',
]);
