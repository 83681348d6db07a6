/**
 * The local stack's contract: ports and versions shared by the native stack, docker-compose.yml,
 * the test harness and every command's defaults. Change a value here and the unit tests check that
 * docker-compose.yml and the Maven poms still agree.
 */
export const STACK_HOST = '127.0.0.1';

export const STACK_PORTS = Object.freeze({
  postgres: 55432,
  kafka: 9092,
  kafkaController: 9093,
  connect: 8083,
  registry: 8081,
  /** Apicurio 3.x opens a Quarkus management interface beside its API; 9000 by default, moved off it. */
  registryManagement: 9001,
  routerMetrics: 9464,
  watchdogMetrics: 9465,
  relayMetrics: 9466,
});

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
  database: 'app',
  user: 'postgres',
  password: 'postgres',
  walLevel: 'logical',
  /** Several connectors plus the slot tests of every suite running at once. */
  maxReplicationSlots: 32,
  maxWalSenders: 32,
  maxConnections: 200,
});

/**
 * Development passwords of the roles `db:provision` creates on the local stack. Production sets its
 * own through OUTBOX_*_PASSWORD. The Connect worker of the local stack gets the CDC one in its
 * environment, so connector configs can reference it as ${env:OUTBOX_CDC_PASSWORD}.
 */
export const LOCAL_ROLE_PASSWORDS = Object.freeze({
  cdc: 'outbox-cdc-local',
  app: 'outbox-app-local',
  monitor: 'outbox-monitor-local',
  router: 'outbox-router-local',
  relay: 'outbox-relay-local',
});

export const KAFKA = Object.freeze({
  /** A fixed KRaft cluster id (22-char base64url UUID) so `format --ignore-formatted` is idempotent. */
  clusterId: 'b3V0Ym94LXJvdXRlci0xAQ',
  connectGroupId: 'outbox-connect',
  connectConfigTopic: '_connect-configs',
  connectOffsetTopic: '_connect-offsets',
  connectStatusTopic: '_connect-status',
});

export const REGISTRY_CCOMPAT_PATH = '/apis/ccompat/v7';
export const REGISTRY_GLOBAL_COMPATIBILITY = 'BACKWARD';

/** Classes Connect must list before the stack counts as ready. */
export const DEBEZIUM_PLUGIN_CLASSES = Object.freeze([
  'io.debezium.connector.postgresql.PostgresConnector',
  'io.debezium.transforms.outbox.EventRouter',
  'io.debezium.converters.BinaryDataConverter',
]);

export const stackUrls = Object.freeze({
  postgres: `postgres://${POSTGRES.user}:${POSTGRES.password}@${STACK_HOST}:${STACK_PORTS.postgres}/${POSTGRES.database}`,
  kafkaBrokers: [`${STACK_HOST}:${STACK_PORTS.kafka}`],
  connect: `http://${STACK_HOST}:${STACK_PORTS.connect}`,
  registry: `http://${STACK_HOST}:${STACK_PORTS.registry}${REGISTRY_CCOMPAT_PATH}`,
});
