/**
 * Inbox retention and parked keys on the real stack: the batched prune (what it deletes, what it keeps
 * for a parked key), the router's own prune and its metric, the retention check of every routed topic as
 * it is subscribed (pruning stops with the reason for a topic that keeps records longer than the window
 * or compacts them, and resumes when that clears; `inbox:prune` refuses), and the per-batch cost of the parked-key load with many parked
 * events (numbers printed, never asserted as timings).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { ConfigResourceTypes, type Admin } from 'kafkajs';
import type { Pool } from 'pg';
import type { OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { createLogger } from '../../src/log';
import { provision } from '../../src/provision';
import { createRouter, createRouterMetrics, type RouterEventListener } from '../../src/router';
import { readParkedSummary } from '../../src/router/housekeeping';
import { pruneInbox } from '../../src/router/inbox-retention';
import { ParkedKeys } from '../../src/router/parked';
import { readParked } from '../../src/status/parked';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, testKafka, type FreshDatabase } from '../support/stack-env';
import { until } from '../support/until';

const DAY = 86_400_000;
const MAIN = join(__dirname, '../../dist/cli/main.js');
const INBOX = '"public"."inbox"';
const PARKED = '"public"."inbox_parked"';

describe('inbox retention (real stack)', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let admin: Admin;
  const topics: string[] = [];

  beforeAll(async () => {
    db = await freshDatabase('inbox_retention');
    config = testConfig(db.name);
    await provision(config);
    pool = createPool(config.database, { max: 4 });
    admin = testKafka().admin();
    await admin.connect();
  });

  afterAll(async () => {
    if (topics.length) await admin.deleteTopics({ topics }).catch(() => {});
    await admin?.disconnect();
    await pool?.end();
    await db?.drop();
  });

  /** `n` inbox rows of `consumer` processed `ageMs` ago; returns their ids. */
  async function inboxRows(consumer: string, n: number, ageMs: number): Promise<string[]> {
    const { rows } = await pool.query<{ message_id: string }>(
      "INSERT INTO inbox (consumer, message_id, processed_at) SELECT $1, gen_random_uuid(), now() - $3::float8 * interval '1 millisecond' FROM generate_series(1, $2) RETURNING message_id",
      [consumer, n, ageMs],
    );
    return rows.map((r) => r.message_id);
  }

  const countOf = async (consumer: string) => Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM inbox WHERE consumer = $1', [consumer])).rows[0]?.n);

  it('migration 010 gives the inbox an index on (consumer, processed_at) that the prune uses', async () => {
    const { rows } = await pool.query<{ indexdef: string }>("SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' AND indexname = 'inbox_processed_idx'");
    expect(rows[0]?.indexdef).toMatch(/USING btree \(consumer, processed_at\)/);
  });

  it('deletes only rows older than the window, in batches, per consumer, and keeps the row of a parked event until it leaves the parked table', async () => {
    const consumer = randomName('svc');
    const other = randomName('other');
    const old = await inboxRows(consumer, 1_200, 40 * DAY);
    await inboxRows(consumer, 300, 1 * DAY);
    await inboxRows(other, 50, 40 * DAY);
    // An event applied 40 days ago whose key was parked later and that was redelivered then: it sits in the
    // parked table (dead-lettered KEY_PARKED) and its replay is a duplicate only while its inbox row exists.
    const parkedId = old[7] as string;
    await pool.query('INSERT INTO inbox_parked (consumer, aggregate_type, aggregate_id, event_id, error_code) VALUES ($1, $2, $3, $4, $5)', [consumer, 'order', 'o-1', parkedId.toUpperCase(), 'KEY_PARKED']);

    const first = await pruneInbox(pool, { inboxTable: INBOX, parkedTable: PARKED, consumer, retentionMs: 30 * DAY, batchSize: 500 });
    expect(first).toMatchObject({ deleted: 1_199, batches: 3 });
    expect(await countOf(consumer)).toBe(301);
    expect(await countOf(other)).toBe(50);
    const kept = await pool.query('SELECT 1 FROM inbox WHERE consumer = $1 AND message_id = $2', [consumer, parkedId]);
    expect(kept.rowCount).toBe(1);

    // Released (or replayed): the row goes at the next prune.
    await pool.query('DELETE FROM inbox_parked WHERE consumer = $1', [consumer]);
    expect(await pruneInbox(pool, { inboxTable: INBOX, parkedTable: PARKED, consumer, retentionMs: 30 * DAY, batchSize: 500 })).toMatchObject({ deleted: 1, batches: 1 });
    expect(await countOf(consumer)).toBe(300);
  });

  /** `outbox inbox:prune --once` with these extra arguments and environment. */
  const prune = (args: string[], env: Record<string, string> = {}) =>
    new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [MAIN, 'inbox:prune', '--once', ...args],
        { env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'silent', PGDATABASE: db.name, OUTBOX_STACK_DIR: process.env.OUTBOX_STACK_DIR, ...env } },
        (e, _stdout, stderr) => resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, stderr }),
      );
    });

  /** The router's events, kept for the test to wait on. */
  function recorder() {
    const events: Array<{ name: string; data: Record<string, unknown> }> = [];
    const metrics = createRouterMetrics();
    const onEvent: RouterEventListener = (name, data) => {
      events.push({ name, data });
      metrics.onEvent(name, data);
    };
    const count = (name: string) => events.filter((e) => e.name === name).length;
    return { events, metrics, onEvent, count, last: (name: string) => [...events].reverse().find((e) => e.name === name)?.data };
  }

  const escaped = (topic: string) => `^${topic.replace(/\./g, '\\.')}$`;

  it('the router prunes on its schedule and the metric moves; below the safe minimum it prunes nothing and says why, and inbox:prune refuses', async () => {
    const consumer = randomName('rt');
    const long = randomName('retention.outbox.event.order');
    const short = randomName('retention.outbox.event.payment');
    topics.push(long, short);
    await admin.createTopics({
      waitForLeaders: true,
      topics: [
        { topic: long, numPartitions: 1, configEntries: [{ name: 'retention.ms', value: String(20 * DAY) }, { name: 'segment.ms', value: String(DAY) }] },
        { topic: short, numPartitions: 1, configEntries: [{ name: 'retention.ms', value: String(2 * DAY) }, { name: 'segment.ms', value: String(DAY) }] },
      ],
    });
    const handlers = { order: { Placed: async () => {} } };
    const silent = createLogger({ level: 'silent' });
    const base = { config, handlers, consumer, logger: silent, aggregateTypeOf: () => 'order', dlqTopicFor: (t: string) => `${t}.dlq`, topicRefreshMs: 0 } as const;

    // 20 d + 1 d segment + 7 d horizon = 28 d > 10 d: the router starts and consumes, but prunes nothing.
    await inboxRows(consumer, 20, 11 * DAY);
    const refused = recorder();
    const held = createRouter({ ...base, topics: new RegExp(escaped(long)), inboxRetentionMs: 10 * DAY, inboxPruneIntervalMs: 1_000, onEvent: refused.onEvent });
    await held.start();
    topics.push(`${long}.dlq`);
    try {
      await until('two prune runs held back', () => refused.count('router.inbox-prune-blocked'), (n) => n >= 2, 20_000);
      expect(refused.last('router.inbox-prune-blocked')).toMatchObject({ code: 'INBOX_RETENTION_TOO_SHORT', reasons: ['retention-too-short'], topics: [long] });
      expect(String(refused.last('router.inbox-prune-blocked')?.error)).toContain('28 d');
      expect(held.readyDetails()).toMatchObject({ inboxPrune: { blocked: true, reasons: ['retention-too-short'], topics: [long] } });
      expect(held.health()).toEqual({ running: true, joined: true, waiting: [] });
      expect(await refused.metrics.registry.metrics()).toContain('outbox_router_inbox_prune_blocked{reason="retention-too-short"} 1');
      expect(await countOf(consumer)).toBe(20);
    } finally {
      await held.stop();
    }
    await pool.query('DELETE FROM inbox WHERE consumer = $1', [consumer]);

    // The CLI refuses the same way (its routed topics from router.topics).
    const cli = await prune(['--consumer', consumer, '--inbox-retention-ms', String(10 * DAY)], { OUTBOX_ROUTER_TOPICS: escaped(long) });
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain('INBOX_RETENTION_TOO_SHORT');

    // 2 d + 1 d + 7 d = 10 d ≤ 10 d: starts, and prunes at once.
    await inboxRows(consumer, 40, 11 * DAY);
    await inboxRows(consumer, 5, DAY);
    const metrics = createRouterMetrics();
    const router = createRouter({ ...base, topics: new RegExp(escaped(short)), inboxRetentionMs: 10 * DAY, inboxPruneIntervalMs: 1_000, inboxPruneBatchSize: 16, parkedMetricsIntervalMs: 1_000, onEvent: metrics.onEvent });
    await router.start();
    topics.push(`${short}.dlq`); // created when the router subscribed
    try {
      await until('the router pruned its old inbox rows', () => countOf(consumer), (n) => n === 5, 20_000);
      await until('the pruned-rows counter', () => metrics.registry.metrics(), (text) => /outbox_router_inbox_pruned_total 40\b/.test(text), 10_000);
      expect(await metrics.registry.metrics()).toMatch(/outbox_router_inbox_last_prune_timestamp_seconds [1-9]/);
      expect(await metrics.registry.metrics()).toContain('outbox_router_inbox_prune_blocked{reason="retention-too-short"} 0');
      expect(router.readyDetails()).toEqual({});
    } finally {
      await router.stop();
    }
  });

  /** Config whose routed topics are `<run>.outbox.event.<type>`, so the router's default subscription is this test's own. */
  function namedConfig(run: string): OutboxConfig {
    return { ...config, connector: { ...config.connector, topicReplacement: `${run}.outbox.event.\${routedByValue}` } };
  }

  it('a router started before its topic exists checks the topic when it subscribes it: created with a long retention, pruning stops with the reason, and resumes once it is safe', async () => {
    const run = randomName('late').replace(/-/g, '');
    const consumer = randomName('late');
    const topic = `${run}.outbox.event.order`;
    topics.push(topic, `${run}.outbox.dlq.order`);
    await inboxRows(consumer, 40, 11 * DAY);
    const r = recorder();
    const router = createRouter({
      config: namedConfig(run),
      handlers: { order: { Placed: async () => {} } },
      consumer,
      logger: createLogger({ level: 'silent' }),
      inboxRetentionMs: 10 * DAY,
      inboxPruneIntervalMs: 1_000,
      // Short enough that a router without the per-topic check would subscribe too: it is the check that is missing.
      topicRefreshMs: 1_000,
      onEvent: r.onEvent,
    });
    await router.start();
    try {
      // No topic yet: only the 7 d horizon counts, and 10 d is safe.
      await until('the first prune (no routed topic yet)', () => countOf(consumer), (n) => n === 0, 20_000);
      await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1, configEntries: [{ name: 'retention.ms', value: String(20 * DAY) }, { name: 'segment.ms', value: String(DAY) }] }] });
      await until('subscribed', () => r.last('router.topics-changed'), 30_000);
      const blocked = await until('pruning stopped', () => r.last('router.inbox-prune-blocked'), 30_000);
      expect(blocked).toMatchObject({ reasons: ['retention-too-short'], topics: [topic] });
      expect(router.readyDetails()).toMatchObject({ inboxPrune: { blocked: true, reasons: ['retention-too-short'] } });
      expect(await r.metrics.registry.metrics()).toContain('outbox_router_inbox_prune_blocked{reason="retention-too-short"} 1');
      // Rows older than the window now stay: each prune run checks first and holds back.
      await inboxRows(consumer, 30, 11 * DAY);
      const runs = r.count('router.inbox-prune-blocked');
      await until('two more prune runs', () => r.count('router.inbox-prune-blocked'), (n) => n >= runs + 2, 20_000);
      expect(await countOf(consumer)).toBe(30);
      expect(router.health().joined).toBe(true);

      // 2 d + 1 d + 7 d = 10 d: safe again, so the next run prunes.
      await admin.alterConfigs({
        validateOnly: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: 'retention.ms', value: String(2 * DAY) }, { name: 'segment.ms', value: String(DAY) }] }],
      });
      await until('pruning resumed', () => countOf(consumer), (n) => n === 0, 30_000);
      expect(r.count('router.inbox-prune-resumed')).toBeGreaterThanOrEqual(1);
      expect(router.readyDetails()).toEqual({});
      expect(await r.metrics.registry.metrics()).toContain('outbox_router_inbox_prune_blocked{reason="retention-too-short"} 0');
    } finally {
      await router.stop();
    }
  });

  it('a compacted topic stops pruning (cleanup.policy compact keeps records past any retention), and inbox:prune refuses it', async () => {
    const run = randomName('compact').replace(/-/g, '');
    const consumer = randomName('compact');
    const topic = `${run}.outbox.event.order`;
    topics.push(topic, `${run}.outbox.dlq.order`);
    // retention.ms 1 d + segment.ms 1 d + 7 d horizon = 9 d < 10 d: safe, were the topic not compacted.
    const settings = [{ name: 'retention.ms', value: String(DAY) }, { name: 'segment.ms', value: String(DAY) }];
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1, configEntries: [...settings, { name: 'cleanup.policy', value: 'compact' }] }] });
    await inboxRows(consumer, 25, 11 * DAY);

    const cli = await prune(['--consumer', consumer, '--inbox-retention-ms', String(10 * DAY)], { OUTBOX_ROUTER_TOPICS: escaped(topic) });
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain('INBOX_RETENTION_TOO_SHORT');
    expect(cli.stderr).toContain('compacted');
    expect(await countOf(consumer)).toBe(25);

    const r = recorder();
    const router = createRouter({ config: namedConfig(run), handlers: { order: { Placed: async () => {} } }, consumer, logger: createLogger({ level: 'silent' }), inboxRetentionMs: 10 * DAY, inboxPruneIntervalMs: 1_000, onEvent: r.onEvent });
    await router.start();
    try {
      await until('two prune runs held back', () => r.count('router.inbox-prune-blocked'), (n) => n >= 2, 20_000);
      expect(r.last('router.inbox-prune-blocked')).toMatchObject({ reasons: ['compacted'], topics: [topic] });
      expect(await r.metrics.registry.metrics()).toContain('outbox_router_inbox_prune_blocked{reason="compacted"} 1');
      expect(await countOf(consumer)).toBe(25);
      await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [...settings, { name: 'cleanup.policy', value: 'delete' }] }] });
      await until('pruning resumed once the topic is no longer compacted', () => countOf(consumer), (n) => n === 0, 30_000);
    } finally {
      await router.stop();
    }
  });

  it('loads only the heads of the batch’s keys, however many events they have parked (10,000 events over 100 keys)', async () => {
    const consumer = randomName('hot');
    await pool.query(
      "INSERT INTO inbox_parked (consumer, aggregate_type, aggregate_id, event_id, error_code) SELECT $1, 'order', 'k-' || (g % 100), gen_random_uuid()::text, 'KEY_PARKED' FROM generate_series(1, 10000) g",
      [consumer],
    );
    await pool.query('ANALYZE inbox_parked');
    // A batch of 500 records over 500 keys, 100 of them parked.
    const keys = Array.from({ length: 500 }, (_, i) => `k-${i}`);
    await ParkedKeys.load(pool, PARKED, consumer, 'order', keys); // warm (prepared statement, cache)
    const runs: number[] = [];
    let parked: ParkedKeys | undefined;
    for (let i = 0; i < 20; i++) {
      const started = performance.now();
      parked = await ParkedKeys.load(pool, PARKED, consumer, 'order', keys);
      runs.push(performance.now() - started);
    }
    expect(keys.filter((k) => parked?.earliest(k) !== undefined)).toHaveLength(100);
    const plan = (await pool.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${ParkedKeys.headsQuery(PARKED)}`, [consumer, 'order', keys])).rows[0]['QUERY PLAN'][0];
    const rowsOut = plan.Plan['Actual Rows'] as number;
    expect(rowsOut).toBe(100);
    // The gauges' one grouped query, and the status section's, over the same table.
    const t0 = performance.now();
    expect(await readParkedSummary(pool, PARKED, consumer)).toEqual([{ aggregateType: 'order', keys: 100, events: 10_000, oldestSeconds: expect.any(Number) }]);
    const summaryMs = performance.now() - t0;
    const t1 = performance.now();
    const status = await readParked(config, 15_000);
    const statusMs = performance.now() - t1;
    expect(status).toMatchObject({ totalKeys: 100, totalEvents: 10_000 });
    expect(status.keys).toHaveLength(10);
    expect(status.oldestAgeMs).toEqual(expect.any(Number));
    // For comparison: the same load with nothing parked, and reading the whole list (what a batch must never do).
    const median = async (body: () => Promise<unknown>) => {
      const times: number[] = [];
      for (let i = 0; i < 20; i++) {
        const started = performance.now();
        await body();
        times.push(performance.now() - started);
      }
      return (times.sort((a, b) => a - b)[10] as number).toFixed(2);
    };
    const emptyMs = await median(() => ParkedKeys.load(pool, PARKED, randomName('none'), 'order', keys));
    const wholeMs = await median(() => pool.query(`SELECT aggregate_id, event_id FROM ${PARKED} WHERE consumer = $1 AND aggregate_type = $2`, [consumer, 'order']));
    const sorted = [...runs].sort((a, b) => a - b);
    console.log(
      `parked head load, 500 keys (100 parked, 10,000 parked events): rows ${rowsOut}, median ${sorted[10]?.toFixed(2)} ms, max ${sorted[19]?.toFixed(2)} ms, ` +
        `server ${(plan['Execution Time'] as number).toFixed(2)} ms; nothing parked ${emptyMs} ms; whole list (10,000 rows) ${wholeMs} ms; gauge query ${summaryMs.toFixed(1)} ms; status section ${statusMs.toFixed(1)} ms`,
    );
    // With the table's 10,000 events the prune's parked check still deletes what it should.
    await pool.query("INSERT INTO inbox (consumer, message_id, processed_at) SELECT $1, gen_random_uuid(), now() - interval '40 days' FROM generate_series(1, 2000)", [consumer]);
    const result = await pruneInbox(pool, { inboxTable: INBOX, parkedTable: PARKED, consumer, retentionMs: 30 * DAY, batchSize: 1_000 });
    expect(result.deleted).toBe(2_000);
    console.log(`prune of 2,000 rows in batches of 1,000 beside 10,000 parked events: ${result.batches} statements, ${result.ms.toFixed(1)} ms`);
  });
});
