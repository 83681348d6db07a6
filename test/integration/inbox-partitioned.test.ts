/**
 * The partitioned inbox (migration 016, docs/inbox-partitions.md) on a real PostgreSQL: the online
 * conversion of a populated inbox while a writer keeps applying events, exact dedup across it and after
 * it (UUIDv7, UUIDv4 and text ids, old and new), partitions added ahead and on demand, dropped past the
 * window and kept for the reasons the drop gives (parked event, another consumer, processed late, a lock
 * not granted), the DELETE prune confined to the catch-all and kept partitions, the router role's
 * rights, and the router doing it on its schedule (the only case that needs Kafka: elsewhere the
 * retention check is the caller's `blocked`).
 */
import { randomUUID } from 'node:crypto';
import { Client, type Pool } from 'pg';
import type { OutboxConfig } from '../../src/config';
import { createPool, qualified } from '../../src/db';
import { provision } from '../../src/provision';
import { derivedName, inboxPartitionNames } from '../../src/provision/sql-files';
import { createRouter, createRouterMetrics, type RouterEventListener } from '../../src/router';
import { createLogger } from '../../src/log';
import { convertInbox } from '../../src/router/inbox-convert';
import { dropInboxPartitions, listInboxPartitions, prunePartitionedInbox } from '../../src/router/inbox-partitions';
import { applyOnce } from '../../src/router/inbox-transaction';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, testKafka, type FreshDatabase } from '../support/stack-env';
import { until } from '../support/until';

const DAY = 86_400_000;
const INBOX = '"public"."inbox"';
const PARKED = '"public"."inbox_parked"';

/** A UUIDv7 text whose timestamp is `ms`. */
function v7At(ms: number): string {
  const h = ms.toString(16).padStart(12, '0');
  const r = randomUUID();
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-7${r.slice(15)}`;
}

describe('partitioned inbox (real stack)', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let admin: Client;
  const fns = inboxPartitionNames({ schema: 'public', inboxTable: 'inbox' });
  // The test's clock: 60 days ago, so the conversion's cutover and the partitions after it are in the past.
  const T0 = Date.now() - 60 * DAY;

  beforeAll(async () => {
    db = await freshDatabase('inbox_partitioned');
    config = testConfig(db.name);
    await provision(config);
    pool = createPool(config.database, { max: 6 });
    admin = new Client(db.config);
    await admin.connect();
  });

  afterAll(async () => {
    await admin?.end();
    await pool?.end();
    await db?.drop();
  });

  const apply = (consumer: string, id: string) => applyOnce(pool, INBOX, consumer, id, async () => {});
  const keyOf = async (id: string) => Number((await pool.query<{ ms: string }>(`SELECT ${fns.messageMs}($1)::text AS ms`, [id])).rows[0]?.ms);

  it('migration 016: the key function maps every id to 0 before conversion, the CHECK holds it, and the router writes it', async () => {
    expect(await keyOf(v7At(Date.now()))).toBe(0);
    expect(await apply('svc', v7At(T0 - DAY))).toBe('applied');
    const { rows } = await pool.query('SELECT message_ms FROM inbox');
    expect(rows).toEqual([{ message_ms: '0' }]);
    // A wrong message_ms is refused by the CHECK (an older router cannot silently break the dedup).
    await expect(pool.query("INSERT INTO inbox (consumer, message_id, message_ms) VALUES ('svc', 'x', 5)")).rejects.toThrow(/inbox_message_ms_check/);
  });

  const oldV7 = Array.from({ length: 20 }, (_, i) => v7At(T0 - 10 * DAY + i));
  const oldV4 = Array.from({ length: 20 }, () => randomUUID());

  it('converts a populated inbox online: the table becomes the catch-all, every event applied before stays a duplicate, and a writer keeps going', async () => {
    await pool.query(
      "INSERT INTO inbox (consumer, message_id, processed_at) SELECT 'svc', 'bulk-' || g, now() - interval '50 days' FROM generate_series(1, 50000) g",
    );
    for (const id of [...oldV7, ...oldV4]) expect(await apply('svc', id)).toBe('applied');
    // A writer applying fresh events (ids before the cutover) the whole time.
    let stop = false;
    let applied = 0;
    const writer = (async () => {
      while (!stop) {
        if ((await apply('svc', v7At(T0 - DAY + applied))) === 'applied') applied += 1;
      }
    })();
    const report = await convertInbox(admin, { schema: 'public', inboxTable: 'inbox', routerRole: config.roles.router, intervalMs: DAY, ahead: 3, now: () => T0 });
    stop = true;
    await writer;
    expect(report.converted).toBe(true);
    expect(report.cutoverMs).toBe(Math.floor(T0 / DAY) * DAY + 2 * DAY);
    expect(report.partitions).toHaveLength(4);
    expect(applied).toBeGreaterThan(0);
    const parts = await listInboxPartitions(pool, INBOX);
    expect(parts?.find((p) => p.fromMs === null)).toEqual({ name: 'inbox_other', fromMs: null, toMs: 1 });
    // Nothing moved: every row is in the catch-all, and every event applied before is a duplicate.
    expect(Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM inbox_other')).rows[0]?.n)).toBe(50_000 + 41 + applied);
    for (const id of [...oldV7, ...oldV4, 'bulk-77']) expect(await apply('svc', id)).toBe('duplicate');
    // Provisioning again (migrations done, roles.sql's grants) works on the partitioned inbox.
    await provision(config);
    expect(await apply('svc', oldV7[0] as string)).toBe('duplicate');
    // Running it again changes nothing.
    expect((await convertInbox(admin, { schema: 'public', inboxTable: 'inbox', routerRole: config.roles.router, intervalMs: DAY, ahead: 3, now: () => T0 })).converted).toBe(false);
  });

  it('after the cutover a UUIDv7 id goes to its time partition, any other id (even one that sorts inside a time range) to the catch-all, each deduped exactly', async () => {
    const cutover = Math.floor(T0 / DAY) * DAY + 2 * DAY;
    const fresh = v7At(cutover + 3 * 3_600_000);
    const before = v7At(cutover - 1);
    // A UUIDv4 whose text starts like a UUIDv7 of the same day: not a v7 (version nibble 4), so key 0.
    const lookalike = `${fresh.slice(0, 14)}4${fresh.slice(15)}`;
    expect(await keyOf(fresh)).toBe(cutover + 3 * 3_600_000);
    expect(await keyOf(before)).toBe(0);
    expect(await keyOf(lookalike)).toBe(0);
    expect(await keyOf('12345')).toBe(0);
    for (const id of [fresh, before, lookalike, '12345']) {
      expect(await apply('svc', id)).toBe('applied');
      expect(await apply('svc', id)).toBe('duplicate');
      expect(await apply('svc', id.toUpperCase())).toBe('duplicate');
    }
    const where = async (id: string) => (await pool.query<{ t: string }>('SELECT tableoid::regclass::text AS t FROM inbox WHERE message_id = $1', [id])).rows.map((r) => r.t);
    expect(await where(fresh)).toEqual([`inbox_p${new Date(cutover).toISOString().slice(0, 10).replace(/-/g, '')}t000000`]);
    expect(await where(lookalike)).toEqual(['inbox_other']);
  });

  it('an event whose partition is missing gets one on demand (the retry finds it)', async () => {
    const far = T0 + 30 * DAY;
    const id = v7At(far);
    await expect(apply('svc', id)).rejects.toThrow(/no partition/);
    expect(await apply('svc', id)).toBe('applied');
    expect(await apply('svc', id)).toBe('duplicate');
    expect((await listInboxPartitions(pool, INBOX))?.some((p) => p.fromMs === Math.floor(far / DAY) * DAY)).toBe(true);
  });

  it('drops partitions past the window, keeps those with a parked event, another consumer or a late row, and DELETEs only below them', async () => {
    const cutover = Math.floor(T0 / DAY) * DAY + 2 * DAY;
    const day = (n: number) => cutover + n * DAY;
    // n UUIDv7 rows from fromMs on, each processed a minute after its id's time (late: now).
    const rows = (consumer: string, fromMs: number, n: number, late = false) =>
      pool.query(
        `INSERT INTO inbox (consumer, message_id, processed_at, message_ms) SELECT $1, id, CASE WHEN $4 THEN now() ELSE to_timestamp((ms + 60000) / 1000.0) END, ${fns.messageMs}(id) ` +
          "FROM (SELECT ms, substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(u, 16) AS id " +
          "FROM (SELECT $2::bigint + g AS ms, lpad(to_hex($2::bigint + g), 12, '0') AS h, gen_random_uuid()::text AS u FROM generate_series(1, $3) g) s) t",
        [consumer, fromMs, n, late],
      );
    for (const n of [4, 5, 6, 7]) await admin.query(`SELECT ${fns.add}($1::bigint, $2::bigint)`, [day(n), DAY]);
    await pool.query('DELETE FROM inbox WHERE message_ms > 0');
    await rows('svc', day(0), 3_000); // dropped
    await rows('svc', day(1), 1_000); // one parked
    await rows('svc', day(2), 1_000); // another consumer's rows too
    await rows('other', day(2) + 5_000, 10);
    await rows('svc', day(3), 1_000); // one processed late (a backlog): its event may still be on its topic
    await rows('svc', day(3) + 5_000, 1, true);
    await rows('svc', day(4), 1_000); // inside the window: untouched
    const parked = (await pool.query<{ message_id: string }>('SELECT message_id FROM inbox WHERE message_ms >= $1 AND message_ms < $2 LIMIT 1', [day(1), day(2)])).rows[0]?.message_id as string;
    await pool.query("INSERT INTO inbox_parked (consumer, aggregate_type, aggregate_id, event_id, error_code) VALUES ('svc', 'order', 'o-1', $1, 'KEY_PARKED')", [parked.toUpperCase()]);
    // The catch-all: old rows of svc go by DELETE as before (50,000 bulk rows 50 days old). The test's clock
    // puts the window's start at day(4): days 0–3 are past it. The DELETE compares processed_at with the
    // database's clock (now() - 30 days, after every row above but the late one).
    const now = () => day(4) + 30 * DAY;
    let blocked = true;
    const options = { inboxTable: INBOX, parkedTable: PARKED, fns, consumer: 'svc', retentionMs: 30 * DAY, intervalMs: DAY, ahead: 1, lockTimeoutMs: 200, batchSize: 20_000, now, blocked: () => blocked };
    // While the retention check blocks: partitions are added, nothing is dropped or deleted.
    const held = await prunePartitionedInbox(pool, options);
    expect(held.drop).toBeUndefined();
    expect(held.added.length).toBeGreaterThan(0);
    blocked = false;
    const result = await prunePartitionedInbox(pool, options);
    expect(result.drop).toMatchObject({ dropped: 1, rows: 3_000, kept: { parked: 1, 'other-consumers': 1, 'processed-late': 1 } });
    const count = async (fromMs: number, toMs: number, consumer = 'svc') =>
      Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM inbox WHERE consumer = $3 AND message_ms >= $1 AND message_ms < $2', [fromMs, toMs, consumer])).rows[0]?.n);
    // Kept partitions: the DELETE took svc's old rows but the parked one and the late one; the window's partition is whole.
    expect(await count(day(1), day(2))).toBe(1);
    expect(await count(day(2), day(3))).toBe(0);
    expect(await count(day(2), day(3), 'other')).toBe(10);
    expect(await count(day(3), day(4))).toBe(1);
    expect(await count(day(4), day(5))).toBe(1_000);
    expect(Number((await pool.query<{ n: string }>("SELECT count(*) AS n FROM inbox WHERE message_id LIKE 'bulk-%'")).rows[0]?.n)).toBe(0);
    expect(result.delete?.deleted).toBeGreaterThanOrEqual(50_000 + 2_998);
    expect(await apply('svc', parked)).toBe('duplicate');
    // The parked event leaves: its partition drops at the next run.
    await pool.query("DELETE FROM inbox_parked WHERE consumer = 'svc'");
    const next = await prunePartitionedInbox(pool, options);
    expect(next.drop).toMatchObject({ dropped: 1, kept: { 'other-consumers': 1, 'processed-late': 1 } });
  });

  it('a drop that cannot get its lock within the lock timeout gives up (and says so) instead of queueing inserts behind it', async () => {
    const parts = (await listInboxPartitions(pool, INBOX)) ?? [];
    const target = parts.filter((p) => p.fromMs !== null).sort((a, b) => (a.fromMs as number) - (b.fromMs as number))[0];
    expect(target).toBeDefined();
    const t = target as { name: string; fromMs: number; toMs: number };
    const other = new Client(db.config);
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query(`SELECT count(*) FROM ${qualified('public', t.name)}`);
      const now = () => t.toMs + 31 * DAY;
      const drop = await dropInboxPartitions(pool, fns, [t], { inboxTable: INBOX, consumer: 'svc', retentionMs: 30 * DAY, lockTimeoutMs: 150, now });
      expect(drop.kept['lock-timeout'] ?? 0).toBe(1);
      expect(drop.lockWaitMs).toBeGreaterThanOrEqual(140);
      expect(drop.lockWaitMs).toBeLessThan(1_000);
    } finally {
      await other.query('ROLLBACK');
      await other.end();
    }
  });

  it("the router's role may add and drop partitions only through the functions", async () => {
    const role = config.roles.router;
    await admin.query('BEGIN');
    try {
      await admin.query(`SET LOCAL ROLE ${admin.escapeIdentifier(role)}`);
      const { rows } = await admin.query<{ name: string | null }>(`SELECT ${fns.add}($1::bigint, $2::bigint) AS name`, [T0 + 50 * DAY, DAY]);
      expect(rows[0]?.name).toMatch(/^inbox_p\d{8}t000000$/);
      await admin.query('SAVEPOINT s');
      await expect(admin.query(`DROP TABLE public.${rows[0]?.name}`)).rejects.toThrow(/must be owner/);
      await admin.query('ROLLBACK TO SAVEPOINT s');
      await expect(admin.query('CREATE TABLE public.inbox_x (LIKE public.inbox)')).rejects.toThrow(/permission denied/);
    } finally {
      await admin.query('ROLLBACK');
    }
  });

  it('converts an inbox whose name is near the 63-byte limit: the names it looks for are the ones the migrations made', async () => {
    const other = await freshDatabase('inbox_convert_long');
    const inboxTable = `inbox_${'x'.repeat(54)}`; // 60 bytes: every derived name is shortened
    const otherConfig = testConfig(other.name, { outbox: { inboxTable } });
    await provision(otherConfig);
    const owner = new Client(other.config);
    await owner.connect();
    try {
      await owner.query(`INSERT INTO ${inboxTable} (consumer, message_id) VALUES ('svc', 'not-a-uuid-1')`);
      const report = await convertInbox(owner, { schema: 'public', inboxTable, routerRole: otherConfig.roles.router, intervalMs: DAY, ahead: 1 });
      expect(report.converted).toBe(true);
      const catchAll = inboxPartitionNames({ schema: 'public', inboxTable }).catchAllName;
      const { rows } = await owner.query<{ indexname: string }>('SELECT indexname FROM pg_indexes WHERE tablename = $1 ORDER BY 1', [catchAll]);
      // The old table's processed index was found and renamed, and its old primary key dropped.
      expect(rows.map((r) => r.indexname)).toContain(derivedName(inboxTable, '_other_processed_idx'));
      expect(rows.map((r) => r.indexname)).not.toContain(derivedName(inboxTable, '_pkey'));
      expect((await owner.query(`SELECT count(*)::int AS n FROM ${inboxTable}`)).rows[0]).toEqual({ n: 1 });
    } finally {
      await owner.end();
      await other.drop();
    }
  });

  it('the conversion waits at most its lock timeout per attempt behind a long transaction, and tries again', async () => {
    const other = await freshDatabase('inbox_convert_wait');
    const otherConfig = testConfig(other.name);
    await provision(otherConfig);
    const owner = new Client(other.config);
    const blocker = new Client(other.config);
    await owner.connect();
    await blocker.connect();
    try {
      // A transaction that read the inbox holds its ACCESS SHARE lock for 700 ms: the swap's first attempts time out.
      await blocker.query('BEGIN');
      await blocker.query('SELECT count(*) FROM inbox');
      const release = new Promise((resolve) => setTimeout(resolve, 700)).then(() => blocker.query('ROLLBACK'));
      const started = Date.now();
      const report = await convertInbox(owner, { schema: 'public', inboxTable: 'inbox', routerRole: otherConfig.roles.router, intervalMs: DAY, ahead: 1, lockTimeoutMs: 200 });
      await release;
      expect(report.converted).toBe(true);
      expect(Date.now() - started).toBeGreaterThanOrEqual(600);
      expect(await listInboxPartitions(owner, INBOX)).toEqual(expect.arrayContaining([{ name: 'inbox_other', fromMs: null, toMs: 1 }]));
    } finally {
      await blocker.end();
      await owner.end();
      await other.drop();
    }
  });

  it('the router adds and drops partitions on its schedule, logs router.inbox-partitions and moves the metrics', async () => {
    const topic = randomName('partitioned.outbox.event.order');
    const kafka = testKafka().admin();
    await kafka.connect();
    try {
      await kafka.createTopics({
        waitForLeaders: true,
        topics: [{ topic, numPartitions: 1, configEntries: [{ name: 'retention.ms', value: String(2 * DAY) }, { name: 'segment.ms', value: String(DAY) }] }],
      });
      // A partition of svc's rows, all processed 40 days ago, whose range ended 39 days ago.
      const from = Math.floor((Date.now() - 40 * DAY) / DAY) * DAY;
      await admin.query(`SELECT ${fns.add}($1::bigint, $2::bigint)`, [from, DAY]);
      await pool.query(
        `INSERT INTO inbox (consumer, message_id, processed_at, message_ms) SELECT 'svc', id, to_timestamp(($1::bigint + 60000) / 1000.0), ${fns.messageMs}(id) ` +
          "FROM (SELECT substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(u, 16) AS id FROM (SELECT lpad(to_hex($1::bigint + g), 12, '0') AS h, gen_random_uuid()::text AS u FROM generate_series(1, 500) g) s) t",
        [from],
      );
      const events: Array<{ name: string; data: Record<string, unknown> }> = [];
      const metrics = createRouterMetrics();
      const onEvent: RouterEventListener = (name, data) => {
        events.push({ name, data });
        metrics.onEvent(name, data);
      };
      const router = createRouter({
        config: { ...config, router: { ...config.router, inboxPartitionIntervalMs: DAY } },
        handlers: { order: { Placed: async () => {} } },
        consumer: 'svc',
        logger: createLogger({ level: 'silent' }),
        aggregateTypeOf: () => 'order',
        dlqTopicFor: (t: string) => `${t}.dlq`,
        topicRefreshMs: 0,
        topics: new RegExp(`^${topic.replace(/\./g, '\\.')}$`),
        inboxRetentionMs: 30 * DAY,
        inboxPruneIntervalMs: 1_000,
        inboxPartitionIntervalMs: DAY,
        onEvent,
      });
      await router.start();
      try {
        const run = await until('a partition run that dropped one', () => events.find((e) => e.name === 'router.inbox-partitions' && Number(e.data.dropped) >= 1)?.data);
        // This one, and the earlier tests' partitions the real clock puts past the window (their rows were
        // processed at their ids' times); not those kept for another consumer or a late row.
        expect(run.droppedNames).toContain(`inbox_p${new Date(from).toISOString().slice(0, 10).replace(/-/g, '')}t000000`);
        expect(Number(run.rows)).toBeGreaterThanOrEqual(500);
        expect(run.kept).toMatchObject({ 'other-consumers': 1, 'processed-late': 1 });
        const text = await metrics.registry.metrics();
        expect(text).toMatch(/outbox_router_inbox_partitions_dropped_total [1-9]/);
        expect(text).toMatch(/outbox_router_inbox_partition_rows_dropped_total [1-9]/);
        // The partitions ahead exist: today's and the next three.
        const today = Math.floor(Date.now() / DAY) * DAY;
        const parts = (await listInboxPartitions(pool, INBOX)) ?? [];
        for (let i = 0; i <= 3; i++) expect(parts.some((p) => p.fromMs === today + i * DAY)).toBe(true);
      } finally {
        await router.stop();
      }
    } finally {
      await kafka.deleteTopics({ topics: [topic] }).catch(() => {});
      await kafka.disconnect();
    }
  });
});
