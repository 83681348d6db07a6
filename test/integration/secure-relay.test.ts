/**
 * The polling relay on the secure stack: it reads the outbox over TLS (verify-full) as its own
 * least-privilege role and publishes as User:outbox-relay, whose ACLs (`outbox kafka:acls`) let it
 * write the routed topics and nothing else; the router reads them as User:outbox-router.
 */
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { createCodec, JSON_CONTENT_TYPE, topicForReplacement } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { createLogger } from '../../src/log';
import { createOutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import { createRelay, type Relay } from '../../src/relay';
import { createRouter, type RoutedEvent, type Router } from '../../src/router';
import { createEffectsTable, recordingHandler } from '../support/effects';
import { randomName } from '../support/stack-env';
import { waitsUpTo } from '../support/until';
import { applyAclsFor, describeSecure, freshSecureDatabase, secureConfig, withSecureAdminClient } from '../support/secure-env';

jest.setTimeout(180_000);

describeSecure('secure-relay')('the polling relay on the secure stack', () => {
  let db: { name: string; drop(): Promise<void> };
  let prefix: string;
  let admin: OutboxConfig;
  let pool: Pool;
  let relay: Relay | undefined;
  let router: Router | undefined;
  const silent = createLogger({ level: 'silent' });

  beforeAll(async () => {
    db = await freshSecureDatabase('srelay');
    prefix = randomName('r').replace(/-/g, '');
    const suffix = prefix.slice(-8);
    const overrides = { connector: { topicReplacement: `${prefix}.outbox.event.\${routedByValue}`, topicPrefix: prefix }, router: { consumer: `c-${prefix}` } };
    admin = secureConfig(db.name, 'outbox-admin', overrides, suffix);
    await applyAclsFor(admin);
    await provision(admin);
    pool = createPool(admin.database, { max: 4 });
    await createEffectsTable(pool);
    await withSecureAdminClient((a) => a.createTopics({ waitForLeaders: true, topics: [{ topic: `${prefix}.outbox.event.order`, numPartitions: 2 }] }));
    // The relay as its own database role and Kafka principal.
    const relayConfig = secureConfig(db.name, 'outbox-relay', { ...overrides, database: { user: admin.roles.relay, password: admin.roles.relayPassword } }, suffix);
    relay = createRelay({ config: relayConfig, logger: silent, settings: { workers: 1, pollIntervalMs: 20 } });
    await relay.start();
    router = createRouter({
      config: secureConfig(db.name, 'outbox-router', overrides, suffix),
      consumer: `c-${prefix}`,
      topics: new RegExp(`^${prefix}\\.outbox\\.event\\.`),
      logger: silent,
      handlers: { order: { OrderCancelled: recordingHandler([] as RoutedEvent[]) } },
    });
    await router.start();
  });

  afterAll(async () => {
    await relay?.stop();
    await router?.stop();
    await pool?.end();
    await db?.drop();
  });

  it('publishes committed events as User:outbox-relay; the router applies each once', async () => {
    const writer = createOutboxWriter({ outbox: admin.outbox, codec: createCodec({ registry: admin.registry, topicFor: topicForReplacement(admin.connector.topicReplacement) }), contentType: JSON_CONTENT_TYPE });
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const orderId = randomUUID();
        ids.push((await writer.writeEvent(client, { aggregateType: 'order', aggregateId: orderId, type: 'OrderCancelled', payload: { orderId, reason: `r${i}`, cancelledAt: new Date() } })).id);
        await client.query(i === 7 ? 'ROLLBACK' : 'COMMIT');
      } finally {
        client.release();
      }
    }
    const committed = ids.filter((_, i) => i !== 7);
    await waitsUpTo(60_000, 200)('19 applied', async () => router?.stats().applied ?? 0, (n) => n >= 19);
    const rows = (await pool.query('SELECT message_id FROM effects')).rows.map((r) => r.message_id as string);
    expect(rows.sort()).toEqual([...committed].sort());
    expect(relay?.stats()).toMatchObject({ published: 19 });
  });
});
