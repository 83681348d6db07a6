/**
 * A router whose database password is refused on the secure stack (a rotation it has not caught up
 * with): it waits, dead-letters nothing, commits no offset past what it applied, and its readiness says
 * which hop refused whom; once the credential works again it applies the event, once.
 */
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { createLogger } from '../../src/log';
import { provision } from '../../src/provision';
import { createRouter, type RoutedEvent, type Router } from '../../src/router';
import { SECURE_POSTGRES } from '../../scripts/stack/secure/secure-settings';
import { createEffectsTable, recordingHandler } from '../support/effects';
import { randomName } from '../support/stack-env';
import { waitsUpTo } from '../support/until';
import { applyAclsFor, describeSecure, freshSecureDatabase, secureConfig, secureKafka, withSecureAdminClient } from '../support/secure-env';

jest.setTimeout(180_000);
const until = waitsUpTo(60_000, 100);

describeSecure('secure-router-refused')('a router refused by PostgreSQL on the secure stack', () => {
  let db: { name: string; drop(): Promise<void> };
  let prefix: string;
  let admin: OutboxConfig;
  let pool: Pool;
  let routerPool: Pool;
  let router: Router | undefined;
  /** The password the router's pool sends: wrong until the test "rotates" it in. */
  let routerPassword = 'stale-password-after-rotation';

  beforeAll(async () => {
    db = await freshSecureDatabase('srefused');
    prefix = randomName('f').replace(/-/g, '');
    const overrides = { connector: { topicReplacement: `${prefix}.outbox.event.\${routedByValue}`, topicPrefix: prefix }, router: { consumer: `c-${prefix}` } };
    admin = secureConfig(db.name, 'outbox-admin', overrides, prefix.slice(-8));
    await applyAclsFor(admin);
    await provision(admin);
    pool = createPool(admin.database, { max: 2 });
    await createEffectsTable(pool);
    await withSecureAdminClient((a) => a.createTopics({ waitForLeaders: true, topics: [{ topic: `${prefix}.outbox.event.order`, numPartitions: 1 }] }));
    // pg asks for the password on every new connection: a function lets the test rotate it in place.
    routerPool = createPool(admin.database, { max: 2, password: () => routerPassword });
  });

  afterAll(async () => {
    await router?.stop();
    await routerPool?.end();
    await pool?.end();
    await db?.drop();
  });

  it('waits with DB_AUTH_FAILED on /readyz, dead-letters and commits nothing, then applies the event once the password works', async () => {
    const seen: RoutedEvent[] = [];
    const routerConfig = secureConfig(db.name, 'outbox-router', { connector: admin.connector, router: { consumer: `c-${prefix}` } }, prefix.slice(-8));
    router = createRouter({
      config: routerConfig,
      consumer: `c-${prefix}`,
      topics: new RegExp(`^${prefix}\\.outbox\\.event\\.`),
      pool: routerPool,
      logger: createLogger({ level: 'silent' }),
      handlers: { order: { OrderCancelled: recordingHandler(seen) } },
      infrastructureBackoff: { initialDelayMs: 100, maxDelayMs: 500 },
      // The group is new: read what was written before it joined, as a service's first deployment does.
      fromBeginning: true,
    });
    await router.start();
    const id = randomUUID();
    const producer = secureKafka('outbox-admin').producer();
    await producer.connect();
    await producer.send({
      topic: `${prefix}.outbox.event.order`,
      messages: [{ key: 'order-1', value: JSON.stringify({ orderId: 'order-1', reason: 'refused-then-applied', cancelledAt: new Date().toISOString() }), headers: { id, eventType: 'OrderCancelled', contentType: 'application/json' } }],
    });
    await producer.disconnect();

    const refused = (await until('the router to report the refusal', () => (router?.readyDetails().refused as Record<string, unknown> | undefined) ?? undefined)) as Record<string, unknown>;
    expect(refused).toMatchObject({ code: 'DB_AUTH_FAILED', hop: 'postgres', principal: SECURE_POSTGRES.user });
    expect(String(refused.message)).toContain('refused the credentials as "postgres"');
    expect(String(refused.message)).not.toContain('stale-password-after-rotation');
    expect(router.ready()).toBe(false);
    expect(router.stats()).toMatchObject({ applied: 0, deadLettered: 0 });
    const committed = await withSecureAdminClient((a) => a.fetchOffsets({ groupId: `c-${prefix}`, topics: [`${prefix}.outbox.event.order`] }));
    expect(committed[0]?.partitions[0]?.offset).toBe('-1');

    routerPassword = SECURE_POSTGRES.password;
    await until('the event applied', () => router?.stats().applied, (n) => n === 1);
    expect(router.stats()).toMatchObject({ applied: 1, deadLettered: 0 });
    expect(router.readyDetails().refused).toBeUndefined();
    await until('ready again', () => router?.ready(), (ok) => ok === true);
    expect((await pool.query('SELECT message_id FROM effects')).rows.map((r) => r.message_id)).toEqual([id]);
    await router.stop();
    router = undefined;
  });

  it('a consumer group its principal may not read: KAFKA_ACL_DENIED on /readyz, the consumer started again until the ACL is granted, then it applies', async () => {
    const consumer = `late-${prefix}`;
    const seen: RoutedEvent[] = [];
    const config = secureConfig(db.name, 'outbox-router', { connector: admin.connector, router: { consumer } }, prefix.slice(-8));
    router = createRouter({
      config,
      consumer,
      topics: new RegExp(`^${prefix}\\.outbox\\.event\\.`),
      pool,
      logger: createLogger({ level: 'silent' }),
      handlers: { order: { OrderCancelled: recordingHandler(seen) } },
      infrastructureBackoff: { initialDelayMs: 100, maxDelayMs: 500 },
      fromBeginning: true,
    });
    await router.start();
    const refused = (await until('the router to report the missing ACL', () => router?.readyDetails().refused)) as Record<string, unknown>;
    expect(refused).toMatchObject({ code: 'KAFKA_ACL_DENIED', hop: 'kafka', principal: 'outbox-router' });
    expect(String(refused.message)).toContain('outbox kafka:acls');
    expect(router.ready()).toBe(false);
    expect(router.stats()).toMatchObject({ applied: 0, deadLettered: 0 });

    // The operator grants what `outbox kafka:acls` prints for this consumer; the running router picks it up.
    await applyAclsFor(secureConfig(db.name, 'outbox-admin', { connector: admin.connector, router: { consumer } }, prefix.slice(-8)));
    await until('the earlier event applied by the new consumer', () => seen.length, (n) => n === 1);
    await until('ready again', () => router?.ready(), (ok) => ok === true);
    expect(router.readyDetails().refused).toBeUndefined();
    expect(router.stats()).toMatchObject({ applied: 1, deadLettered: 0 });
  });
});
