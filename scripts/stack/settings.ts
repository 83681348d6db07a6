/**
 * The local stack's contract: ports and versions shared by the native stack, docker-compose.yml,
 * the test harness and every command's defaults. Change a value here and the unit tests check that
 * docker-compose.yml and the Maven poms still agree.
 */
export { STACK_HOST, STACK_PORTS, LOCAL_ROLE_PASSWORDS, REGISTRY_CCOMPAT_PATH, stackUrls } from 'outbox-router/local-stack';
import { LOCAL_POSTGRES, STACK_HOST as HOST } from 'outbox-router/local-stack';

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

/**
 * `stack up --profile cluster` (OUTBOX_STACK_PROFILE): the production topology in miniature, beside the
 * default one-node `single` profile. docs/local-stack.md ("The cluster profile") has what runs and why.
 */
export const STACK_PROFILES = Object.freeze(['single', 'cluster'] as const);
export type StackProfile = (typeof STACK_PROFILES)[number];
export const DEFAULT_STACK_PROFILE: StackProfile = 'single';

/**
 * The cluster profile's nodes. kafka-1 and connect-1 keep the single stack's ports, so every command's
 * default (127.0.0.1:9092, http://127.0.0.1:8083) still reaches the cluster; a client needs the full
 * broker list (KAFKA_BROKERS) only to bootstrap while kafka-1 is down.
 */
export const CLUSTER = Object.freeze({
  kafkaNodes: Object.freeze([
    Object.freeze({ name: 'kafka-1', nodeId: 1, port: 9092, controllerPort: 9093 }),
    Object.freeze({ name: 'kafka-2', nodeId: 2, port: 9192, controllerPort: 9193 }),
    Object.freeze({ name: 'kafka-3', nodeId: 3, port: 9292, controllerPort: 9293 }),
  ] as const),
  connectWorkers: Object.freeze([
    Object.freeze({ name: 'connect-1', port: 8083 }),
    Object.freeze({ name: 'connect-2', port: 8084 }),
  ] as const),
  replicationFactor: 3,
  minInsyncReplicas: 2,
  /**
   * How long the Connect group waits for a departed worker before moving its tasks (Kafka's default is
   * 5 minutes). docs/local-stack.md ("A dead Connect worker") has the measurements behind the value.
   */
  scheduledRebalanceMaxDelayMs: 10_000,
});
export type KafkaNodeName = (typeof CLUSTER.kafkaNodes)[number]['name'];
export type ConnectWorkerName = (typeof CLUSTER.connectWorkers)[number]['name'];

/** The cluster's bootstrap list, every broker: what a client needs to start while kafka-1 is down. */
export const CLUSTER_BROKERS: readonly string[] = Object.freeze(CLUSTER.kafkaNodes.map((n) => `${HOST}:${n.port}`));

/**
 * What every client of the cluster profile is configured with, as production configures its clients:
 * all three brokers to bootstrap from (one that starts while kafka-1 is down must still start) and the
 * second Connect worker as connect.fallbackUrls (Connect must stay reachable while connect-1 is down).
 */
export const CLUSTER_CLIENTS = Object.freeze({
  kafka: { brokers: [...CLUSTER_BROKERS] },
  connect: { fallbackUrls: CLUSTER.connectWorkers.slice(1).map((w) => `http://${HOST}:${w.port}`) },
});
