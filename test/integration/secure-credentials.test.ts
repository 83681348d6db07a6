/**
 * OAUTHBEARER and refused credentials on the secure profile's real servers: a client authenticates with
 * an unsecured JWS on the OAUTHBEARER listener (its principal the token's `sub`), and each hop's wrong
 * password, untrusted certificate and plain text to a TLS port gives the one error
 * src/errors/credentials.ts promises, naming the hop and the principal, never the secret.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { createRegistryConnection } from '../../src/codec';
import { loadConfig, type OutboxConfig, type OutboxOptions } from '../../src/config';
import { createConnectClient } from '../../src/connector/connect-client';
import { clientConfig, withClient } from '../../src/db';
import { createKafka, kafkaCredentialFailure } from '../../src/kafka';
import { unsecuredJwsForTestsOnly } from '../../src/testing';
import { SECURE_HTTP_USERS, SECURE_KAFKA_USERS, SECURE_POSTGRES, SECURE_PORTS, secureUrls } from '../../scripts/stack/secure/secure-settings';
import { certs, describeSecure, withSecureAdminClient, expectRefusal, failureOf } from '../support/secure-env';

jest.setTimeout(120_000);

const OTHER_CA = certs.caCert.replace(/ca\.crt$/, 'other-ca.crt');



function kafkaSettings(kafka: OutboxOptions['kafka']): OutboxConfig {
  return loadConfig({ env: {}, overrides: { kafka: { brokers: [...secureUrls.kafkaBrokers], ssl: { caFile: certs.caCert }, ...kafka } } });
}

/** An admin client's connect and first request, failure classified as the product does. */
async function kafkaFailure(config: OutboxConfig): Promise<unknown> {
  const admin = createKafka(config, { retries: 0, overrides: { connectionTimeout: 5_000 } }).admin();
  const error = await failureOf(admin.connect().then(() => admin.listTopics()));
  await admin.disconnect().catch(() => {});
  return kafkaCredentialFailure(error, config.kafka) ?? error;
}

describeSecure('secure-credentials.test.ts')('OAUTHBEARER and refused credentials on the secure stack', () => {
  describe('OAUTHBEARER (unsecured JWS) on its listener', () => {
    const oauth = (token: string) =>
      loadConfig({ env: {}, overrides: { kafka: { brokers: [...secureUrls.kafkaOauthBrokers], ssl: { caFile: certs.caCert }, sasl: { mechanism: 'oauthbearer', oauthbearer: { token } } } } });

    it('authenticates as the token\'s sub: the admin principal produces and reads back; an unknown principal is denied by ACL, named', async () => {
      const topic = `oauth-${randomUUID()}`;
      await withSecureAdminClient((admin) => admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 1 }] }));
      try {
        const admin = oauth(unsecuredJwsForTestsOnly({ principal: 'outbox-admin' }));
        const producer = createKafka(admin, { retries: 1 }).producer();
        await producer.connect();
        await producer.send({ topic, messages: [{ key: 'k', value: 'through oauthbearer' }] });
        await producer.disconnect();
        const kafkaAdmin = createKafka(admin, { retries: 1 }).admin();
        await kafkaAdmin.connect();
        const offsets = await kafkaAdmin.fetchTopicOffsets(topic);
        await kafkaAdmin.disconnect();
        expect(offsets[0]?.high).toBe('1');

        const stranger = `stranger-${randomUUID().slice(0, 8)}`;
        const denied = oauth(unsecuredJwsForTestsOnly({ principal: stranger }));
        const p = createKafka(denied, { retries: 0 }).producer();
        await p.connect();
        const error = await failureOf(p.send({ topic, messages: [{ value: 'x' }] }));
        await p.disconnect();
        expectRefusal(kafkaCredentialFailure(error, denied.kafka), 'KAFKA_ACL_DENIED', 'TOPIC_AUTHORIZATION_FAILED', 'outbox kafka:acls');
      } finally {
        await withSecureAdminClient((admin) => admin.deleteTopics({ topics: [topic] }));
      }
    });

    // kafkajs takes the broker's RFC 7628 error challenge for success; the broker then drops the connection.
    it.each([
      ['expired', unsecuredJwsForTestsOnly({ principal: 'outbox-admin', issuedAt: Math.floor(Date.now() / 1000) - 7200, lifetimeSeconds: 60 })],
      ['not a JWS', 'not-a-jws'],
    ])('a token that is %s is refused: KAFKA_AUTH_FAILED naming the brokers and the OAUTHBEARER settings', async (_what, token) => {
      expectRefusal(await kafkaFailure(oauth(token)), 'KAFKA_AUTH_FAILED', secureUrls.kafkaOauthBrokers[0] as string, 'OAUTHBEARER token refused');
    });
  });

  describe('Kafka brokers (SASL_SSL SCRAM-SHA-512)', () => {
    it('a wrong password: KAFKA_AUTH_FAILED naming the user', async () => {
      const config = kafkaSettings({ sasl: { mechanism: 'scram-sha-512', username: 'outbox-router', password: 'wrong-password-xyz' } });
      expectRefusal(await kafkaFailure(config), 'KAFKA_AUTH_FAILED', 'as "outbox-router"', '127.0.0.1:9392', 'OUTBOX_KAFKA_SASL_PASSWORD');
    });

    it('a CA that did not sign the broker: KAFKA_TLS_FAILED pointing at the CA file setting', async () => {
      const config = kafkaSettings({ ssl: { caFile: OTHER_CA }, sasl: { mechanism: 'scram-sha-512', username: 'outbox-router', password: SECURE_KAFKA_USERS['outbox-router'] } });
      expectRefusal(await kafkaFailure(config), 'KAFKA_TLS_FAILED', 'not trusted', 'OUTBOX_KAFKA_SSL_CA_FILE');
    });

    it('plain text to the TLS listener: KAFKA_TLS_FAILED saying to turn TLS on', async () => {
      const config = loadConfig({ env: {}, overrides: { kafka: { brokers: [...secureUrls.kafkaBrokers], sasl: { mechanism: 'scram-sha-512', username: 'outbox-router', password: SECURE_KAFKA_USERS['outbox-router'] } } } });
      expectRefusal(await kafkaFailure(config), 'KAFKA_TLS_FAILED', 'Turn TLS on');
    });
  });

  describe('PostgreSQL (hostssl, scram-sha-256)', () => {
    const database = (over: Partial<OutboxConfig['database']>) =>
      loadConfig({ env: {}, overrides: { database: { host: '127.0.0.1', port: SECURE_PORTS.postgres, database: 'app', user: 'postgres', password: SECURE_POSTGRES.password, sslMode: 'verify-full', sslRootCert: certs.caCert, ...over } } }).database;
    const connectWith = (db: OutboxConfig['database']) => failureOf(withClient(clientConfig(db), (c: Client) => c.query('SELECT 1')));

    it('the right settings connect (the control)', async () => {
      await expect(withClient(clientConfig(database({})), async (c: Client) => (await c.query('SELECT 1 AS one')).rows[0])).resolves.toEqual({ one: 1 });
    });

    it('a wrong password: DB_AUTH_FAILED naming the role', async () => {
      expectRefusal(await connectWith(database({ password: 'wrong-password-xyz' })), 'DB_AUTH_FAILED', 'as "postgres"', '127.0.0.1:56432/app', 'PGPASSWORD');
    });

    it('an untrusted server certificate: DB_TLS_FAILED pointing at sslRootCert', async () => {
      expectRefusal(await connectWith(database({ sslRootCert: OTHER_CA })), 'DB_TLS_FAILED', 'OUTBOX_DB_SSL_ROOT_CERT');
    });

    it('plain text to a hostssl-only server: DB_AUTH_FAILED that says to turn TLS on', async () => {
      expectRefusal(await connectWith(database({ sslMode: 'disable', sslRootCert: undefined })), 'DB_AUTH_FAILED', 'no encryption', 'turn it on');
    });
  });

  describe('Kafka Connect REST (https, basic auth)', () => {
    const settings = (over: Record<string, unknown>) => ({ url: secureUrls.connect, ...SECURE_HTTP_USERS.connect, caFile: certs.caCert, requestTimeoutMs: 10_000, ...over });

    it('a wrong password: CONNECT_AUTH_FAILED naming the user; an untrusted certificate: CONNECT_TLS_FAILED', async () => {
      await expect(createConnectClient(settings({})).list()).resolves.toEqual(expect.any(Array));
      expectRefusal(await failureOf(createConnectClient(settings({ password: 'wrong-password-xyz' })).list()), 'CONNECT_AUTH_FAILED', 'as "outbox-operator"', 'OUTBOX_CONNECT_PASSWORD');
      expectRefusal(await failureOf(createConnectClient(settings({ caFile: OTHER_CA })).list()), 'CONNECT_TLS_FAILED', 'OUTBOX_CONNECT_CA_FILE');
    });
  });

  describe('schema registry (nginx TLS + basic auth)', () => {
    const settings = (over: Record<string, unknown>) => ({ url: secureUrls.registry, ...SECURE_HTTP_USERS.registry, caFile: certs.caCert, ...over });

    it('a wrong password: REGISTRY_AUTH_FAILED naming the user; an untrusted certificate: REGISTRY_TLS_FAILED', async () => {
      await expect(createRegistryConnection(settings({})).latest(`no-such-subject-${randomUUID()}`)).resolves.toBeUndefined();
      const wrong = createRegistryConnection(settings({ password: 'wrong-password-xyz' }), { retries: 0 });
      expectRefusal(await failureOf(wrong.latest('any')), 'REGISTRY_AUTH_FAILED', 'as "outbox-registry"', 'OUTBOX_REGISTRY_PASSWORD');
      const untrusted = createRegistryConnection(settings({ caFile: OTHER_CA }), { retries: 0 });
      expectRefusal(await failureOf(untrusted.latest('any')), 'REGISTRY_TLS_FAILED', 'OUTBOX_REGISTRY_CA_FILE');
    });
  });
});
