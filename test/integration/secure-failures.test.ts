/**
 * Failures with a credential in them, on the secure stack, beyond a wrong password (secure-credentials):
 * a server whose certificate expired, plain text to an https port, a missing ACL under a running router,
 * and a credential rotated while the router runs. Each gives one clear error naming the hop, and the
 * router loses nothing: it waits (never dead-letters), its /readyz says why, and once the operator
 * fixes the cause it applies every event exactly once.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import type { Pool } from 'pg';
import { createRegistryConnection } from '../../src/codec';
import { loadConfig, type OutboxConfig } from '../../src/config';
import { createConnectClient } from '../../src/connector/connect-client';
import { clientConfig, createPool, withClient } from '../../src/db';
import { createKafka, kafkaCredentialFailure } from '../../src/kafka';
import { createLogger } from '../../src/log';
import { provision } from '../../src/provision';
import { createRouter, type Router } from '../../src/router';
import { rotateScramPassword } from '../../scripts/stack/secure/rotate';
import { SECURE_HTTP_USERS, SECURE_KAFKA_USERS, SECURE_POSTGRES, secureUrls } from '../../scripts/stack/secure/secure-settings';
import { applyKafkaAcls, planKafkaAcls } from '../../src/acls';
import { randomName } from '../support/stack-env';
import { startTlsStandin } from '../support/tls-standin';
import { waitsUpTo } from '../support/until';
import { certs, describeSecure, freshSecureDatabase, secureConfig, secureKafka, withSecureAdminClient, expectRefusal, failureOf } from '../support/secure-env';

jest.setTimeout(240_000);



describeSecure('secure-failures')('failures with a credential in them, on the secure stack', () => {
  describe('a server whose certificate expired (a stand-in presenting one, signed by the trusted CA)', () => {
    it('Kafka: KAFKA_TLS_FAILED', async () => {
      const standin = await startTlsStandin(certs.expired);
      try {
        const config = loadConfig({ env: {}, overrides: { kafka: { brokers: [`127.0.0.1:${standin.port}`], ssl: { caFile: certs.caCert }, sasl: { mechanism: 'scram-sha-512', username: 'outbox-router', password: SECURE_KAFKA_USERS['outbox-router'] } } } });
        const admin = createKafka(config, { retries: 0, overrides: { connectionTimeout: 5_000 } }).admin();
        const error = await failureOf(admin.connect());
        await admin.disconnect().catch(() => {});
        expectRefusal(kafkaCredentialFailure(error, config.kafka) ?? error, 'KAFKA_TLS_FAILED', 'expired');
      } finally {
        await standin.close();
      }
    });

    it('PostgreSQL: DB_TLS_FAILED', async () => {
      const standin = await startTlsStandin(certs.expired, { postgres: true });
      try {
        const db = loadConfig({ env: {}, overrides: { database: { host: '127.0.0.1', port: standin.port, database: 'app', user: 'postgres', password: SECURE_POSTGRES.password, sslMode: 'verify-full', sslRootCert: certs.caCert } } }).database;
        expectRefusal(await failureOf(withClient(clientConfig(db), (c: Client) => c.query('SELECT 1'))), 'DB_TLS_FAILED', 'expired');
      } finally {
        await standin.close();
      }
    });

    it('Kafka Connect and the registry: CONNECT_TLS_FAILED, REGISTRY_TLS_FAILED', async () => {
      const standin = await startTlsStandin(certs.expired);
      try {
        const url = `https://127.0.0.1:${standin.port}`;
        expectRefusal(await failureOf(createConnectClient({ url, ...SECURE_HTTP_USERS.connect, caFile: certs.caCert, requestTimeoutMs: 5_000 }).list()), 'CONNECT_TLS_FAILED', 'expired');
        expectRefusal(await failureOf(createRegistryConnection({ url: `${url}/apis/ccompat/v7`, ...SECURE_HTTP_USERS.registry, caFile: certs.caCert }, { retries: 0 }).latest('any')), 'REGISTRY_TLS_FAILED', 'expired');
      } finally {
        await standin.close();
      }
    });
  });

  it('plain http to the https ports: Connect is CONNECT_TLS_FAILED saying to use https; the registry\'s proxy says so itself', async () => {
    const plain = (url: string) => url.replace('https://', 'http://');
    expectRefusal(await failureOf(createConnectClient({ url: plain(secureUrls.connect), ...SECURE_HTTP_USERS.connect, requestTimeoutMs: 5_000 }).list()), 'CONNECT_TLS_FAILED', 'the port speaks TLS', 'https://');
    // nginx answers plain HTTP on its TLS port with its own 400 page, whose words the error now carries.
    expectRefusal(await failureOf(createRegistryConnection({ url: plain(secureUrls.registry), ...SECURE_HTTP_USERS.registry }, { retries: 0 }).latest('any')), 'REGISTRY_REQUEST_FAILED', 'The plain HTTP request was sent to HTTPS port');
  });

  describe('the router when Kafka refuses it', () => {
    let db: { name: string; drop(): Promise<void> };
    let config: OutboxConfig;
    let pool: Pool;
    let topic: string;
    const routers: Router[] = [];
    const until = waitsUpTo(90_000, 250);
    const silent = createLogger({ level: 'silent' });

    beforeAll(async () => {
      db = await freshSecureDatabase('sfail');
      const prefix = randomName('f').replace(/-/g, '');
      topic = `${prefix}.outbox.event.order`;
      config = secureConfig(db.name, 'outbox-router-b', {
        connector: { topicReplacement: `${prefix}.outbox.event.\${routedByValue}`, topicPrefix: prefix },
        router: { consumer: `c-${prefix}` },
        acls: { routerPrincipal: 'User:outbox-router-b' },
      });
      await provision(config);
      pool = createPool(config.database, { max: 2 });
      await withSecureAdminClient((admin) => admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1 }, { topic: topic.replace('.event.', '.dlq.'), numPartitions: 1 }] }));
    });

    afterEach(async () => {
      await Promise.all(routers.splice(0).map((r) => r.stop().catch(() => {})));
    });

    afterAll(async () => {
      rotateScramPassword('outbox-router-b', SECURE_KAFKA_USERS['outbox-router-b']);
      await pool?.end();
      await db?.drop();
    });

    /** Event Router-shaped JSON records, produced by the stack's admin. */
    async function produce(n: number, tag: string): Promise<string[]> {
      const ids = Array.from({ length: n }, () => randomUUID());
      const producer = secureKafka('outbox-admin').producer();
      await producer.connect();
      await producer.send({
        topic,
        acks: -1,
        messages: ids.map((id, i) => ({ key: `k-${tag}-${i % 2}`, value: JSON.stringify({ tag }), headers: { id, eventType: 'OrderNoted', contentType: 'application/json' } })),
      });
      await producer.disconnect();
      return ids;
    }

    function start(password: string = SECURE_KAFKA_USERS['outbox-router-b']): Router {
      const withPassword = { ...config, kafka: { ...config.kafka, sasl: { ...config.kafka.sasl, password } } } as OutboxConfig;
      const router = createRouter({
        config: withPassword,
        consumer: config.router.consumer as string,
        topics: new RegExp(`^${topic.replace(/\./g, '\\.')}$`),
        logger: silent,
        handlers: { order: { OrderNoted: async () => {} } },
      });
      routers.push(router);
      void router.start().catch(() => {});
      return router;
    }

    const inboxIds = async () => (await pool.query('SELECT message_id FROM inbox ORDER BY message_id')).rows.map((r) => String(r.message_id));
    const refusedCode = (router: Router) => ((router.readyDetails().refused as { code?: string } | undefined)?.code);

    it('without its group ACL it waits, unready with KAFKA_ACL_DENIED, dead-letters nothing, and applies everything once the ACL is granted', async () => {
      // Everything its plan grants but the group.
      const { plan } = planKafkaAcls(config, { components: ['router'] });
      await withSecureAdminClient((admin) => applyKafkaAcls(admin, plan.filter((e) => e.resourceType !== 'GROUP')));
      const ids = await produce(4, 'acl');
      const router = start();
      await until('the router says why it is not ready', async () => refusedCode(router), (code) => code === 'KAFKA_ACL_DENIED');
      expect(router.ready()).toBe(false);
      expect(router.stats()).toMatchObject({ applied: 0, deadLettered: 0 });
      expect(await inboxIds()).toEqual([]);
      await withSecureAdminClient((admin) => applyKafkaAcls(admin, plan));
      await until('all applied after the grant', async () => router.stats().applied, (n) => n >= 4);
      await until('ready again', async () => router.ready(), (ready) => ready);
      expect(router.stats()).toMatchObject({ applied: 4, deadLettered: 0 });
      expect(await inboxIds()).toEqual([...ids].sort());
    });

    it('a password rotated while it runs: nothing is lost or dead-lettered; a router on the old password is refused with KAFKA_AUTH_FAILED, one on the new applies the rest once', async () => {
      const first = start();
      await until('joined', async () => first.ready(), (ready) => ready);
      const before = await inboxIds();
      rotateScramPassword('outbox-router-b', 'router-b-rotated-1');
      const during = await produce(2, 'during');
      // kafkajs opens connections as it needs them: the running router either applies on one it
      // authenticated before, or is refused on a new one and waits, saying so; it never dead-letters.
      const outcome = await until('applied, or refused and waiting', async () => ({ applied: first.stats().applied, refused: refusedCode(first) }), (o) => o.applied >= 2 || o.refused === 'KAFKA_AUTH_FAILED');
      if (outcome.refused) expect(first.ready()).toBe(false);
      expect(first.stats().deadLettered).toBe(0);
      await first.stop();
      // Restarted on the old password (a deployment not yet given the new one): refused at start, clearly.
      const stale = createRouter({ config: { ...config, kafka: { ...config.kafka, sasl: { ...config.kafka.sasl, password: SECURE_KAFKA_USERS['outbox-router-b'] } } } as OutboxConfig, consumer: config.router.consumer as string, topics: new RegExp(`^${topic.replace(/\./g, '\\.')}$`), logger: silent, handlers: { order: { OrderNoted: async () => {} } } });
      expectRefusal(await failureOf(stale.start()), 'KAFKA_AUTH_FAILED', '"outbox-router-b"');
      await stale.stop().catch(() => {});
      const after = await produce(2, 'after');
      const fresh = start('router-b-rotated-1');
      await until('the rest applied', async () => (await inboxIds()).length, (n) => n >= before.length + 4);
      expect(fresh.stats().deadLettered).toBe(0);
      expect(await inboxIds()).toEqual([...before, ...during, ...after].sort());
    });
  });
});
