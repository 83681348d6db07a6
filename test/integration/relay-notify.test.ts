import { Client, type Pool } from 'pg';
import { createCodec, JSON_CONTENT_TYPE, topicForReplacement } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { createLogger } from '../../src/log';
import { createOutboxWriter, type OutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import { createRelay, type Relay, type RelayEventName } from '../../src/relay';
import { relayChannel } from '../../src/relay/wake';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, pgConfig, randomIdentifier, randomName, withClient, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

jest.setTimeout(120_000);

/**
 * relay.notify on the real stack: db:provision adds the outbox's notify trigger, the relay LISTENs and an
 * idle relay publishes a new row long before its poll interval; without notifications (no trigger, a
 * dropped LISTEN session) it still publishes by polling.
 */
describe('relay wake-up on LISTEN/NOTIFY', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let writer: OutboxWriter;
  const relays: Relay[] = [];
  const silent = createLogger({ level: 'silent', format: 'json' });
  // Long enough that only a notification explains a publish within LONG_POLL_MS / 3.
  const LONG_POLL_MS = 30_000;
  const until = waitsUpTo(LONG_POLL_MS / 3);
  const pw = randomIdentifier('pw');

  beforeAll(async () => {
    db = await freshDatabase('relay_notify');
    const prefix = randomName('t').replace(/-/g, '');
    const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
    config = testConfig(db.name, {
      connector: { topicReplacement, topicPrefix: prefix },
      relay: { notify: true },
      roles: { cdcPassword: `${pw}-cdc`, appPassword: `${pw}-app`, monitorPassword: `${pw}-mon`, routerPassword: `${pw}-rt`, relayPassword: `${pw}-rl` },
    });
    const report = await provision(config);
    expect(report.relayNotify).toBe('created');
    writer = createOutboxWriter({ outbox: config.outbox, codec: createCodec({ registry: config.registry, topicFor: topicForReplacement(topicReplacement) }), contentType: JSON_CONTENT_TYPE });
    pool = createPool(config.database, { max: 4 });
    await pool.query('CREATE TABLE orders (id text PRIMARY KEY, total int NOT NULL)');
  });

  afterAll(async () => {
    await pool?.end();
    await db?.drop();
    await withClient('postgres', async (c) => {
      for (const role of ['cdc', 'app', 'monitor', 'router', 'relay'] as const) await c.query(`DROP ROLE IF EXISTS ${c.escapeIdentifier(config.roles[role])}`).catch(() => {});
    });
  });

  afterEach(() => Promise.all(relays.splice(0).map((r) => r.stop())));

  async function startIdleRelay(settings: Record<string, unknown> = {}) {
    const events: Array<{ name: RelayEventName; data: Record<string, unknown> }> = [];
    const relay = createRelay({ config, logger: silent, onEvent: (name, data) => events.push({ name, data }), settings: { workers: 2, pollIntervalMs: LONG_POLL_MS, ...settings } });
    relays.push(relay);
    await relay.start();
    // Both workers have polled once, found nothing, and sleep for the poll interval.
    await until('relay idle', () => relay.stats().emptyClaims, (n) => n >= 2);
    return { relay, events };
  }

  const order = async (id: string) => {
    await writer.writeWith(pool, { text: 'INSERT INTO orders (id, total) VALUES ($1, $2)', values: [id, 5] }, [
      { aggregateType: 'order', aggregateId: id, type: 'OrderCreated', payload: { id } },
    ]);
  };

  it('an idle relay with a 30 s poll interval publishes a new row long before the interval could elapse', async () => {
    const { relay } = await startIdleRelay();
    expect(relay.health().listening).toBe(true);
    await order(randomName('o'));
    await until('published', () => relay.stats().published, (n) => n >= 1);
    expect(relay.stats().wakes).toBeGreaterThanOrEqual(1);
  });

  it('a dropped LISTEN session is reconnected, and rows are published meanwhile by polling', async () => {
    const { relay, events } = await startIdleRelay({ pollIntervalMs: 300, retryInitialDelayMs: 50, retryMaxDelayMs: 200 });
    await withClient(db.name, (c) => c.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'outbox-relay:listen'"));
    await until('listen session down', () => events.filter((e) => e.name === 'relay.listen' && e.data.state === 'down').length, (n) => n >= 1);
    await order(randomName('o'));
    await until('published by polling', () => relay.stats().published, (n) => n >= 1);
    await until('listening again', () => relay.health().listening, (up) => up);
  });

  it('without the trigger the relay warns and still publishes by polling', async () => {
    const off = { ...config, relay: { ...config.relay, notify: false } } as OutboxConfig;
    expect((await provision(off)).relayNotify).toBe('dropped');
    try {
      const { relay, events } = await startIdleRelay({ pollIntervalMs: 300 });
      expect(events.some((e) => e.name === 'relay.listen' && e.data.state === 'no-trigger')).toBe(true);
      await order(randomName('o'));
      await until('published by polling', () => relay.stats().published, (n) => n >= 1);
      expect(relay.stats().wakes).toBe(1); // only the one of LISTEN's first connect
    } finally {
      expect((await provision(config)).relayNotify).toBe('created');
    }
  });

  it('provisioning again leaves the trigger as it is', async () => {
    expect((await provision(config)).relayNotify).toBe('present');
  });

  it('least privilege: the application role fires the NOTIFY by inserting, the relay role LISTENs; neither may call the function', async () => {
    const login = async (role: 'app' | 'relay') => {
      const client = new Client({ ...pgConfig(db.name), user: config.roles[role], password: config.roles[`${role}Password`] });
      await client.connect();
      return client;
    };
    const relayClient = await login('relay');
    const appClient = await login('app');
    try {
      const channel = relayChannel(config.outbox.schema, config.outbox.table);
      const heard: string[] = [];
      relayClient.on('notification', (m) => heard.push(m.channel));
      await relayClient.query(`LISTEN ${relayClient.escapeIdentifier(channel)}`);
      await appClient.query(
        "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type) VALUES (gen_random_uuid(), 'order', '1', 'OrderCreated', '\\x7b7d', 'application/json')",
      );
      await until('notification heard by the relay role', () => heard.length, (n) => n >= 1);
      expect(heard[0]).toBe(channel);
      for (const client of [appClient, relayClient]) {
        await expect(client.query(`SELECT ${client.escapeIdentifier(config.outbox.schema)}.${client.escapeIdentifier(channel)}()`)).rejects.toThrow(/permission denied/);
      }
    } finally {
      await relayClient.end();
      await appClient.end();
    }
  });
});
