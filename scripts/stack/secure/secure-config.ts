import type { OutboxOptions } from 'outbox-router/config';
import type { StackCerts } from './certs';
import { SECURE_HTTP_USERS, SECURE_KAFKA_USERS, SECURE_PORTS, SECURE_POSTGRES, secureUrls, type SecureKafkaUser } from './secure-settings';

/**
 * The settings of a client of the secure stack, as its operator would write them: one Kafka principal
 * (SCRAM-SHA-512), the stack's CA for every hop, basic auth to Connect and the registry, PostgreSQL with
 * verify-full, and the role passwords (the worker knows the CDC one). The one home of these settings:
 * `demo --profile secure` and the secure tests use it.
 */
export function secureOutboxOptions(certs: StackCerts, database: string, principal: SecureKafkaUser): OutboxOptions {
  const { cdc, app, monitor, router, relay } = SECURE_POSTGRES.roles;
  return {
    database: { host: '127.0.0.1', port: SECURE_PORTS.postgres, database, user: SECURE_POSTGRES.user, password: SECURE_POSTGRES.password, sslMode: 'verify-full', sslRootCert: certs.caCert },
    roles: { cdcPassword: cdc, appPassword: app, monitorPassword: monitor, routerPassword: router, relayPassword: relay },
    kafka: { brokers: [...secureUrls.kafkaBrokers], ssl: { caFile: certs.caCert }, sasl: { mechanism: 'scram-sha-512', username: principal, password: SECURE_KAFKA_USERS[principal] } },
    connect: { url: secureUrls.connect, ...SECURE_HTTP_USERS.connect, caFile: certs.caCert },
    registry: { url: secureUrls.registry, ...SECURE_HTTP_USERS.registry, caFile: certs.caCert },
  };
}
