/**
 * Outbox health on the real stack (docs/operations.md, "Outbox health"): the one outbox sample read as
 * the provisioned monitoring role, `outbox status`'s outbox section, the watchdog's outbox gauges and
 * its OutboxBacklogAge / OutboxTableSize rules delivered to a local webhook, and the relay's /healthz
 * going 503 while a real broker outage (this client's connections refused at the TCP level) stops
 * every publish, and 200 again once it ends. A fresh database and roles of its own.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import axios from 'axios';
import { Client } from 'pg';
import type { OutboxConfig } from '../../src/config';
import { createKafka } from '../../src/kafka';
import { createLogger } from '../../src/log';
import { provision } from '../../src/provision';
import { createRelay, createRelayMetrics, relayHealthBody, type Relay } from '../../src/relay';
import { startHealthServer, type HealthServer } from '../../src/service';
import { collectStatus } from '../../src/status';
import { createWatchdog, dedupKey, sampleOutbox, type Watchdog } from '../../src/watchdog';
import { createKafkaFaults } from '../support/kafka-faults';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, pgConfig, randomIdentifier, randomName, testKafka, withClient, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

jest.setTimeout(120_000);

const until = waitsUpTo(20_000);
const silent = createLogger({ level: 'silent', format: 'json' });

describe('outbox health (real stack)', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let prefix: string;

  const admin = <T>(body: (c: Client) => Promise<T>) => withClient(db.name, body);
  const asMonitor = async <T>(body: (c: Client) => Promise<T>): Promise<T> => {
    const client = new Client({ ...pgConfig(db.name), user: config.roles.monitor, password: config.roles.monitorPassword as string });
    await client.connect();
    try {
      return await body(client);
    } finally {
      await client.end();
    }
  };
  /** `n` events of `aggregateType`, created `ageSeconds` ago (only the admin may back-date). */
  const insert = (n: number, aggregateType: string, ageSeconds = 0) =>
    admin((c) =>
      c.query(
        'INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type, created_at) ' +
          "SELECT gen_random_uuid(), $1, 'k' || (i % 5), 'Happened', convert_to('{}', 'UTF8'), 'application/json', now() - $2::float8 * interval '1 second' " +
          'FROM generate_series(1, $3::int) i',
        [aggregateType, ageSeconds, n],
      ),
    );
  const clear = () => admin((c) => c.query('DELETE FROM outbox'));

  beforeAll(async () => {
    db = await freshDatabase('health');
    prefix = randomName('h').replace(/-/g, '');
    config = testConfig(db.name, { connector: { topicReplacement: `${prefix}.outbox.event.\${routedByValue}`, topicPrefix: prefix } });
    await provision(config);
  });

  afterAll(async () => {
    await db?.drop();
    await withClient('postgres', async (c) => {
      for (const role of Object.values({ a: config.roles.cdc, b: config.roles.app, c: config.roles.monitor, d: config.roles.router, e: config.roles.relay })) {
        await c.query(`DROP ROLE IF EXISTS ${c.escapeIdentifier(role)}`).catch(() => {});
      }
    });
  });

  describe('the outbox sample', () => {
    afterAll(clear);

    it('as the monitoring role: size, rows, dead tuples, vacuum, the oldest waiting row and a capped count, but never the payload', async () => {
      await insert(5, 'order', 7200);
      await insert(3, 'order');
      await admin((c) => c.query("UPDATE outbox SET published_at = now() WHERE created_at > now() - interval '1 minute'"));
      await admin((c) => c.query('VACUUM outbox'));
      const sample = await asMonitor((c) => sampleOutbox(c, { schema: 'public', table: 'outbox', backlogCap: 3 }));
      expect(sample).toMatchObject({ table: 'public.outbox', present: true, pendingRows: 3, pendingCapped: true, pendingError: null });
      expect(sample.oldestPendingAgeSeconds).toBeGreaterThanOrEqual(7200);
      expect(sample.oldestPendingAgeSeconds).toBeLessThan(7260);
      expect(sample.totalBytes).toBeGreaterThanOrEqual(8192);
      expect(sample.lastVacuumMs).toBeGreaterThan(Date.now() - 60_000);
      // VACUUM's own counts: 8 live rows; the updated rows' old versions were removed
      expect(sample.estimatedRows).toBe(8);
      const uncapped = await asMonitor((c) => sampleOutbox(c, { schema: 'public', table: 'outbox', backlogCap: 100 }));
      expect(uncapped).toMatchObject({ pendingRows: 5, pendingCapped: false });
      // the watchdog's form: no count at all, the oldest row only
      expect(await asMonitor((c) => sampleOutbox(c, { schema: 'public', table: 'outbox' }))).toMatchObject({ pendingRows: null, pendingCapped: false });

      await admin((c) => c.query('DELETE FROM outbox WHERE published_at IS NOT NULL'));
      await until('dead tuples counted', () => asMonitor((c) => sampleOutbox(c, { schema: 'public', table: 'outbox' })), (s) => (s.deadTuples ?? 0) >= 3);

      await asMonitor(async (c) => {
        await expect(c.query('SELECT payload FROM outbox')).rejects.toMatchObject({ code: '42501' });
        await expect(c.query('SELECT aggregate_id FROM outbox')).rejects.toMatchObject({ code: '42501' });
        await expect(c.query('DELETE FROM outbox')).rejects.toMatchObject({ code: '42501' });
      });
    });

    it('a role without the grant still reads the statistics, and says why the waiting rows are missing; a missing table is not present', async () => {
      const role = randomIdentifier('bare_mon');
      await withClient('postgres', (c) => c.query(`CREATE ROLE ${role} LOGIN PASSWORD 'bare' IN ROLE pg_monitor`));
      try {
        const client = new Client({ ...pgConfig(db.name), user: role, password: 'bare' });
        await client.connect();
        try {
          const sample = await sampleOutbox(client, { schema: 'public', table: 'outbox', backlogCap: 10 });
          expect(sample).toMatchObject({ present: true, oldestPendingAgeSeconds: null, pendingRows: null });
          expect(sample.totalBytes).toBeGreaterThan(0);
          expect(sample.pendingError).toContain('db:provision');
          expect(await sampleOutbox(client, { schema: 'public', table: 'no_such_outbox' })).toMatchObject({ present: false, totalBytes: null, pendingError: null });
        } finally {
          await client.end();
        }
      } finally {
        await withClient('postgres', (c) => c.query(`DROP ROLE ${role}`));
      }
    });
  });

  it('outbox status shows the outbox table section and warns about an old waiting row', async () => {
    await insert(4, 'order', 3600);
    try {
      const status = await collectStatus(config, { timeoutMs: 5_000, watchdogUrl: 'http://127.0.0.1:1', outboxWarnAgeMs: 30 * 60_000, outboxWarnPending: 2 });
      expect(status.outboxTable).toMatchObject({ ok: true, table: 'public.outbox', provisioned: true, pendingRows: 4, pendingCapped: false, pendingError: null });
      if (!status.outboxTable.ok) throw new Error('unreadable');
      expect(status.outboxTable.oldestPendingAgeSeconds).toBeGreaterThanOrEqual(3600);
      const reasons = status.verdict.reasons.map((r) => r.message).filter((m) => m.startsWith('outbox table'));
      expect(reasons).toEqual([
        expect.stringMatching(/^outbox table public\.outbox: the oldest row with published_at IS NULL is 60m old \(over --outbox-warn-age-ms 1800000\)/),
        'outbox table public.outbox: 4 rows with published_at IS NULL (over --outbox-warn-pending 2)',
      ]);
    } finally {
      await clear();
    }
  });

  describe('the watchdog (as the monitoring role)', () => {
    let receiver: { url: string; bodies: Array<Record<string, unknown>>; close(): Promise<void> };
    let watchdog: Watchdog | undefined;

    beforeAll(async () => {
      const bodies: Array<Record<string, unknown>> = [];
      const server: Server = createServer((req, res) => {
        let raw = '';
        req.on('data', (d: Buffer) => (raw += d.toString()));
        req.on('end', () => {
          bodies.push(JSON.parse(raw) as Record<string, unknown>);
          res.writeHead(200).end();
        });
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
      receiver = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, bodies, close: () => new Promise((r) => server.close(() => r())) };
    });

    afterAll(async () => {
      await watchdog?.stop(0);
      await receiver?.close();
      await clear();
    });

    it('exports the outbox gauges each poll, and OutboxBacklogAge / OutboxTableSize fire and resolve through the webhook', async () => {
      const wdConfig = testConfig(db.name, {
        roles: config.roles,
        watchdog: {
          user: config.roles.monitor,
          password: config.roles.monitorPassword,
          watchConnector: false,
          intervalMs: 200,
          cluster: 'health-test',
          clearForMs: 300,
          repeatIntervalMs: 0,
          webhookUrl: receiver.url,
          rules: {
            outboxBacklogAgeMs: { warning: 10 * 60_000, critical: 24 * 3600_000 },
            outboxBacklogAgeForMs: 0,
            // the table with its indexes is always larger than 1 byte: fires at once
            outboxTableBytes: { warning: 1, critical: 1024 ** 4 },
            outboxTableSizeForMs: 0,
          },
          delivery: { initialDelayMs: 100, maxDelayMs: 500 },
        },
      });
      watchdog = createWatchdog({ config: wdConfig, logger: silent });
      watchdog.start();
      const events = (rule: string) =>
        receiver.bodies.filter((b) => b.dedupKey === dedupKey('health-test', null, rule as never)).map((b) => `${String(b.event)}:${String(b.severity)}`);

      await until('OutboxTableSize fires', () => events('OutboxTableSize'), (e) => e.includes('firing:warning'));
      const metricsText = () => watchdog!.metrics.registry.metrics();
      const gauge = async (name: string) => {
        const line = (await metricsText()).split('\n').find((l) => l.startsWith(`${name}{cluster="health-test",table="public.outbox"}`));
        return line === undefined ? undefined : Number(line.split(' ').pop());
      };
      expect(await gauge('outbox_table_bytes')).toBeGreaterThan(0);
      expect(await gauge('outbox_table_rows')).toBeGreaterThanOrEqual(0);
      expect(await gauge('outbox_table_dead_tuples')).toBeGreaterThanOrEqual(0);
      expect(await gauge('outbox_oldest_pending_age_seconds')).toBe(0);
      expect(await gauge('outbox_table_last_vacuum_timestamp_seconds')).toBeGreaterThan(Date.now() / 1000 - 600);
      expect(events('OutboxBacklogAge')).toEqual([]);

      // a row waiting for an hour: the age gauge follows and the rule fires
      await insert(2, 'order', 3600);
      await until('age gauge', () => gauge('outbox_oldest_pending_age_seconds'), (v) => (v ?? 0) >= 3600);
      await until('OutboxBacklogAge fires', () => events('OutboxBacklogAge'), (e) => e.includes('firing:warning'));
      const firing = receiver.bodies.find((b) => b.rule === 'OutboxBacklogAge' && b.event === 'firing') as { values: Record<string, unknown>; summary: string; slot: unknown };
      expect(firing.slot).toBeNull();
      expect(firing.values).toMatchObject({ table: 'public.outbox' });
      expect(firing.values.oldestPendingAgeSeconds as number).toBeGreaterThanOrEqual(3600);
      expect(firing.summary).toContain('published_at IS NULL');
      expect(watchdog.statuses()).toEqual(expect.arrayContaining([expect.objectContaining({ rule: 'OutboxBacklogAge', level: 'warning', slot: null })]));

      // the rows are handled (here: deleted): resolved after clearForMs
      await clear();
      await until('OutboxBacklogAge resolves', () => events('OutboxBacklogAge'), (e) => e.includes('resolved:warning'));
      expect(await gauge('outbox_oldest_pending_age_seconds')).toBe(0);
      expect(events('OutboxBacklogAge')).toEqual(['firing:warning', 'resolved:warning']);
    });
  });

  describe('the relay /healthz', () => {
    let relay: Relay | undefined;
    let http: HealthServer | undefined;

    afterAll(async () => {
      await relay?.stop();
      await http?.close();
      await clear();
    });

    it('answers 503 while a broker outage fails every publish with rows waiting, 200 again after it, and stays 200 while idle', async () => {
      const faults = createKafkaFaults();
      const kafka = createKafka(config, {
        role: 'relay',
        overrides: { socketFactory: faults.socketFactory, connectionTimeout: 1_000, retry: { retries: 1, initialRetryTime: 100, maxRetryTime: 300 } },
      });
      const metrics = createRelayMetrics();
      relay = createRelay({
        config,
        kafka,
        logger: silent,
        onEvent: metrics.onEvent,
        settings: { workers: 2, pollIntervalMs: 50, lagIntervalMs: 200, unhealthyAfterMs: 1_500, retryInitialDelayMs: 50, retryMaxDelayMs: 300 },
      });
      await relay.start();
      const r = relay;
      http = await startHealthServer({ host: '127.0.0.1', port: 0, registry: metrics.registry, health: () => relayHealthBody(r) });
      const url = `http://127.0.0.1:${http.port}`;
      const healthz = async () => {
        const res = await axios.get<Record<string, unknown>>(`${url}/healthz`, { validateStatus: () => true });
        return { status: res.status, body: res.data };
      };
      const metric = async (name: string) => {
        const text = (await axios.get<string>(`${url}/metrics`)).data;
        const line = text.split('\n').find((l) => l.startsWith(`${name} `));
        return line === undefined ? undefined : Number(line.split(' ')[1]);
      };
      const waiting = async () => Number((await admin((c) => c.query('SELECT count(*) AS n FROM outbox WHERE published_at IS NULL'))).rows[0].n);
      const type = randomName('agg');

      await insert(10, type);
      await until('published', waiting, (n) => n === 0);
      expect((await healthz()).status).toBe(200);

      faults.cut();
      await insert(20, type);
      const down = await until('/healthz 503 while nothing publishes', healthz, (h) => h.status === 503);
      const publishing = (down.body.publishing ?? {}) as Record<string, unknown>;
      expect(publishing.reason).toEqual(expect.stringContaining('every publish failed'));
      expect(publishing.failingSince).toEqual(expect.any(String));
      expect(await waiting()).toBe(20);
      await until('backlog gauge', () => metric('outbox_relay_backlog_rows'), (v) => v === 20);
      await until('blocked keys gauge', () => metric('outbox_relay_blocked_keys'), (v) => (v ?? 0) > 0);

      faults.restore();
      await until('published after the outage', waiting, (n) => n === 0, 60_000);
      await until('/healthz 200 again', healthz, (h) => h.status === 200);
      await until('backlog gauge back to 0', () => metric('outbox_relay_backlog_rows'), (v) => v === 0);

      // idle, with nothing to publish, for longer than unhealthyAfterMs: still healthy
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      expect((await healthz()).status).toBe(200);
      expect(relay.health().publishing).toMatchObject({ healthy: true, failingSince: null });
    });

    it('answers 503 while the broker refuses to create the topic (replication factor 3 on one broker), 200 once the topic exists', async () => {
      await relay?.stop();
      await http?.close();
      const metrics = createRelayMetrics();
      relay = createRelay({ config, logger: silent, onEvent: metrics.onEvent, settings: { workers: 1, pollIntervalMs: 50, lagIntervalMs: 200, unhealthyAfterMs: 1_000, topicReplicationFactor: 3, retryMaxDelayMs: 300 } });
      await relay.start();
      const r = relay;
      http = await startHealthServer({ host: '127.0.0.1', port: 0, registry: metrics.registry, health: () => relayHealthBody(r) });
      const healthz = async () => (await axios.get(`http://127.0.0.1:${http!.port}/healthz`, { validateStatus: () => true })).status;
      expect(await healthz()).toBe(200);
      const type = randomName('agg');
      await insert(3, type);
      await until('/healthz 503 while the topic cannot be created', healthz, (status) => status === 503);
      expect(relay.stats().published).toBe(0);

      const kafkaAdmin = testKafka().admin();
      await kafkaAdmin.connect();
      try {
        await kafkaAdmin.createTopics({ waitForLeaders: true, topics: [{ topic: `${prefix}.outbox.event.${type}`, numPartitions: 1, replicationFactor: 1 }] });
      } finally {
        await kafkaAdmin.disconnect();
      }
      await until('/healthz 200 once the topic exists', healthz, (status) => status === 200, 30_000);
      // one successful publish makes the relay healthy again; the other rows may still be in flight
      await until('the three rows published', async () => relay!.stats().published, (n) => n >= 3, 30_000);
      expect(relay.stats().published).toBeGreaterThanOrEqual(3);
    });
  });
});
