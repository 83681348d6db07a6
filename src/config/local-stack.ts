/**
 * The local development stack's addresses and published development credentials: the "local profile".
 * Every command's defaults point here, so a new user needs no configuration to try outbox-router on the
 * stack that `npm run stack:up` (or docker-compose.yml) starts. The conveniences that are safe only there
 * (the published passwords, a default consumer name) are refused for any other database; see
 * `isLocalStackDatabase`. The development harness imports these values from here, never the other way.
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
  /** `outbox console`: its page, admin API and probes. */
  console: 9467,
});

/** The local stack's database and its superuser. */
export const LOCAL_POSTGRES = Object.freeze({
  database: 'app',
  user: 'postgres',
  password: 'postgres',
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

export const REGISTRY_CCOMPAT_PATH = '/apis/ccompat/v7';

export const stackUrls = Object.freeze({
  postgres: `postgres://${LOCAL_POSTGRES.user}:${LOCAL_POSTGRES.password}@${STACK_HOST}:${STACK_PORTS.postgres}/${LOCAL_POSTGRES.database}`,
  kafkaBrokers: [`${STACK_HOST}:${STACK_PORTS.kafka}`],
  connect: `http://${STACK_HOST}:${STACK_PORTS.connect}`,
  registry: `http://${STACK_HOST}:${STACK_PORTS.registry}${REGISTRY_CCOMPAT_PATH}`,
});

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

/**
 * Is this database the local development stack (a loopback address on the stack's PostgreSQL port)?
 * Conveniences that are safe only there (published default passwords, a default consumer name) are
 * refused anywhere else, so a production database never silently gets them.
 */
export function isLocalStackDatabase(database: { host: string; port: number }): boolean {
  return LOOPBACK.has(database.host.toLowerCase()) && database.port === STACK_PORTS.postgres;
}
