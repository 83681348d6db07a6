import { STACK_HOST } from '../settings';

/**
 * `stack up --profile secure`: the single-node stack with TLS and authentication on every hop
 * (docs/local-stack.md, "The secure profile"). It runs beside the plain stack, on ports of its own, in a
 * state folder of its own, so a plain-text client pointed at the usual defaults never reaches it by
 * accident, and the two can run at once.
 *
 * Every password here is a published development credential of this local stack only, like the plain
 * stack's `postgres`/`postgres`: production sets its own through the environment.
 */
export const SECURE_PORTS = Object.freeze({
  /** PostgreSQL: hostssl only, scram-sha-256. */
  postgres: 56432,
  /** Kafka SASL_SSL with SCRAM-SHA-512: clients and inter-broker traffic. */
  kafka: 9392,
  /** KRaft controller: SASL_SSL with PLAIN (KRaft controllers cannot use SCRAM, whose credentials live in the metadata they serve). */
  kafkaController: 9393,
  /** Kafka SASL_SSL with OAUTHBEARER, validated by Kafka's unsecured JWS validator (tests only). */
  kafkaOauth: 9394,
  /** Kafka Connect REST on https with basic auth. */
  connect: 8483,
  /** The schema registry through nginx: https with basic auth. */
  registry: 8481,
  /** Apicurio itself, plain http on loopback, reachable only through nginx's basic auth in production terms. */
  registryBackend: 8482,
  registryManagement: 9002,
});

/** The Kafka users (SCRAM-SHA-512) and their passwords; the ACLs name them as `User:<name>`. */
export const SECURE_KAFKA_USERS = Object.freeze({
  /** Inter-broker traffic; a super user. */
  broker: 'broker-secure-local',
  /** The stack's own admin (topic set-up, ACLs, tests' fixtures); a super user. */
  'outbox-admin': 'admin-secure-local',
  'outbox-connect': 'connect-secure-local',
  'outbox-router': 'router-secure-local',
  /** A second router principal, for the boundary "one consumer cannot read another's group or dead letters". */
  'outbox-router-b': 'router-b-secure-local',
  'outbox-dlq-replay': 'replay-secure-local',
  'outbox-relay': 'relay-secure-local',
  'outbox-status': 'status-secure-local',
  'outbox-console': 'console-secure-local',
});
export type SecureKafkaUser = keyof typeof SECURE_KAFKA_USERS;

/** The controller listener's PLAIN user (KRaft). */
export const SECURE_CONTROLLER_USER = Object.freeze({ name: 'controller', password: 'controller-secure-local' });

/** Kafka Connect REST basic auth (BasicAuthSecurityRestExtension) and the registry's (nginx). */
export const SECURE_HTTP_USERS = Object.freeze({
  connect: Object.freeze({ username: 'outbox-operator', password: 'connect-rest-secure-local' }),
  registry: Object.freeze({ username: 'outbox-registry', password: 'registry-secure-local' }),
});

/** The database superuser and the role passwords db:provision is given through OUTBOX_*_PASSWORD. */
export const SECURE_POSTGRES = Object.freeze({
  database: 'app',
  user: 'postgres',
  password: 'postgres-secure-local',
  roles: Object.freeze({
    cdc: 'outbox-cdc-secure-local',
    app: 'outbox-app-secure-local',
    monitor: 'outbox-monitor-secure-local',
    router: 'outbox-router-secure-local',
    relay: 'outbox-relay-secure-local',
  }),
});

export const SECURE_HOST = STACK_HOST;
/** The name on every server certificate besides the IP address: clients verify either. */
export const SECURE_DNS_NAME = 'localhost';

/** The secure stack's addresses. */
export const secureUrls = Object.freeze({
  kafkaBrokers: [`${SECURE_HOST}:${SECURE_PORTS.kafka}`],
  kafkaOauthBrokers: [`${SECURE_HOST}:${SECURE_PORTS.kafkaOauth}`],
  connect: `https://${SECURE_HOST}:${SECURE_PORTS.connect}`,
  registry: `https://${SECURE_HOST}:${SECURE_PORTS.registry}/apis/ccompat/v7`,
});
