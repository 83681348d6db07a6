import { randomUUID } from 'node:crypto';
import { Client, type Pool } from 'pg';
import { runOutboxCleanup, type OutboxCleanupRun } from '../../src/cleanup';
import { topicForReplacement } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { connectorStatus, deleteConnector, deployConnector, pauseConnector, resumeConnector, switchToRelay } from '../../src/connector';
import { clientConfig, createPool } from '../../src/db';
import { createLogger } from '../../src/log';
import { provision } from '../../src/provision';
import { createWatchdog } from '../../src/watchdog';
import { createRelay, type Relay } from '../../src/relay';
import { collect } from '../support/consume';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

jest.setTimeout(240_000);
const until = waitsUpTo(90_000, 200);

/** Inserts `n` events of one aggregate in one transaction (as the table owner: plain SQL, the documented columns). */
async function write(pool: Pick<Pool, 'query'>, aggregateId: string, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, () => randomUUID());
  await pool.query(
    `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type)
     SELECT id, 'order', $2, 'OrderPlaced', convert_to('{"n":1}', 'UTF8'), 'application/json' FROM unnest($1::uuid[]) AS id`,
    [ids, aggregateId],
  );
  return ids;
}

async function present(pool: Pick<Pool, 'query'>, ids: string[]): Promise<number> {
  const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE id = ANY($1::uuid[])', [ids]);
  return rows[0]!.n;
}

const cleanup = (pool: Pick<Pool, 'query'>, config: OutboxConfig, batchSize = 1_000): Promise<OutboxCleanupRun> =>
  runOutboxCleanup(pool, { outbox: config.outbox, slotName: config.connector.slotName, batchSize, maxBatches: 100 });

/**
 * The proof of migration 011 on a slot moved by hand (pg_replication_slot_advance plays the connector
 * confirming): a row goes only once the slot has confirmed a mark taken after its transaction ended.
 */
describe('outbox cleanup against the slot (no connector)', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;

  beforeAll(async () => {
    db = await freshDatabase('cleanup');
    config = testConfig(db.name);
    await provision(config);
    pool = createPool(config.database, { max: 4 });
    // Only a registered slot is proof (migration 012); connector:deploy registers its own.
    await pool.query("INSERT INTO outbox_cleanup_registrations (slot_name, registered_by) VALUES ($1, 'manual')", [config.connector.slotName]);
  });
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  /** The connector reading and confirming everything committed so far (decoding, so the slot's statistics count it). */
  const confirmAll = () =>
    pool.query("SELECT count(*) FROM pg_logical_slot_get_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)", [config.connector.slotName, config.outbox.publication]);

  it('deletes nothing without the slot, nothing the slot has not confirmed, nothing from before the slot, and never a transaction that was running at the mark', async () => {
    const early = await write(pool, 'a', 5);
    const noSlot = await cleanup(pool, config);
    expect(noSlot).toMatchObject({ slotFound: false, deleted: 0 });
    expect(await present(pool, early)).toBe(5);

    await pool.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [config.connector.slotName]);
    // The slot starts after `early`: no connector could ever read them, so they are below the floor
    // the first run records, however many marks the slot confirms.
    const first = await cleanup(pool, config);
    expect(first).toMatchObject({ slotFound: true, deleted: 0, safeLsn: null });
    expect(first.pendingLsn).not.toBeNull();

    const written = await write(pool, 'b', 7);
    // A transaction still open when the next marks are taken.
    const open = new Client(clientConfig(config.database));
    await open.connect();
    try {
      await open.query('BEGIN');
      const [openId] = await write(open, 'c', 1);
      for (let i = 0; i < 3; i++) expect((await cleanup(pool, config)).deleted).toBe(0); // the slot has not moved
      expect(await present(pool, [...early, ...written])).toBe(12);

      await confirmAll();
      // The first mark was taken before `written`: it frees nothing of them. This run takes the next mark.
      expect((await cleanup(pool, config)).deleted).toBe(0);
      await confirmAll();
      expect((await cleanup(pool, config)).deleted).toBe(7);
      expect(await present(pool, written)).toBe(0);
      await open.query('COMMIT');
      // The mark confirmed next was taken while `open` ran: it frees nothing of it…
      await confirmAll();
      expect((await cleanup(pool, config)).deleted).toBe(0);
      expect(await present(pool, [openId!])).toBe(1);
      // …the mark taken after its commit does.
      await confirmAll();
      expect((await cleanup(pool, config)).deleted).toBe(1);
      expect(await present(pool, [openId!])).toBe(0);
      expect(await present(pool, early)).toBe(5);
    } finally {
      await open.end();
    }
  });

  it('the watchdog role may run it with no privilege on the outbox; the application role may not', async () => {
    const asRole = async (user: string, password: string | undefined, body: (c: Client) => Promise<void>) => {
      const c = new Client(clientConfig({ ...config.database, user, password: password ?? '' }));
      await c.connect();
      try {
        await body(c);
      } finally {
        await c.end();
      }
    };
    await asRole(config.roles.monitor, config.roles.monitorPassword, async (c) => {
      const run = await cleanup(c, config);
      expect(run.slotFound).toBe(true);
      await expect(c.query('DELETE FROM outbox')).rejects.toMatchObject({ code: '42501' });
    });
    await asRole(config.roles.app, config.roles.appPassword, async (c) => {
      await expect(cleanup(c, config)).rejects.toMatchObject({ code: 'OUTBOX_CLEANUP_UNAVAILABLE' });
    });
  });
});

/**
 * With the real connector: rows it has published go; rows written while it is paused stay however often
 * the cleanup runs, and go once it resumes and confirms. Then the switch to the relay marks what CDC
 * published and the relay publishes only the rest: every event on the topic exactly once.
 */
describe('outbox cleanup and the switch to the relay with Debezium', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let relay: Relay | undefined;
  let topic: string;

  beforeAll(async () => {
    db = await freshDatabase('cleanupcdc');
    const prefix = randomName('cl').replace(/-/g, '');
    config = testConfig(db.name, { connector: { topicReplacement: `${prefix}.outbox.event.\${routedByValue}`, topicPrefix: prefix } });
    topic = `${prefix}.outbox.event.order`;
    await provision(config);
    pool = createPool(config.database, { max: 4 });
    await deployConnector(config);
  });
  afterAll(async () => {
    await relay?.stop();
    await deleteConnector(config, { dropSlot: true, force: true }).catch(() => {});
    await pool?.end();
    await db?.drop();
  });

  const onTopic = async (count: number) => collect([topic], (r) => r.length >= count, 90_000);

  it('never deletes what a paused connector has not read; deletes it after it resumes', async () => {
    const published = await write(pool, 'p', 20);
    await onTopic(20);
    // Each run leaves a mark for the connector to confirm; a row goes once a mark after its commit is confirmed.
    await until('the published rows cleaned', async () => (await cleanup(pool, config), await present(pool, published)), (n) => n === 0);

    await pauseConnector(config);
    await until('connector and task paused', async () => {
      const status = await connectorStatus(config);
      return status.state === 'PAUSED' && status.tasks.length > 0 && status.tasks.every((t) => t.state === 'PAUSED');
    });
    const unread = await write(pool, 'u', 15);
    for (let i = 0; i < 5; i++) {
      await cleanup(pool, config);
      await new Promise((r) => setTimeout(r, 1_000));
    }
    expect(await present(pool, unread)).toBe(15);
    expect(await present(pool, published)).toBe(0);

    await resumeConnector(config);
    // The default host of the cleanup: the watchdog, on a short interval here.
    const watchdog = createWatchdog({ config: { ...config, watchdog: { ...config.watchdog, outboxCleanup: { ...config.watchdog.outboxCleanup, intervalMs: 250 } } }, deliver: false });
    watchdog.start();
    try {
      await until('the watchdog cleaned the resumed connector’s rows', () => present(pool, unread), (n) => n === 0);
      const metrics = await watchdog.metrics.registry.getSingleMetricAsString('outbox_cleanup_deleted_rows_total');
      expect(Number(/outbox_cleanup_deleted_rows_total\{[^}]*\} (\d+)/.exec(metrics)?.[1])).toBeGreaterThanOrEqual(15);
      expect(watchdog.health().outboxCleanup?.lastRun?.slotFound).toBe(true);
    } finally {
      await watchdog.stop();
    }
    const records = await onTopic(35);
    expect(new Set(records.map((r) => r.headers.id))).toEqual(new Set([...published, ...unread]));
  });

  it('switch-to-relay marks what CDC published and the relay publishes the rest, once', async () => {
    const before = await write(pool, 's', 10);
    await onTopic(45);
    await pauseConnector(config);
    // Paused for real before the writes: a task still running would publish part of the pending
    // transaction, and the switch leaves a part-published transaction to the relay whole (its published
    // part goes out twice, by design; the inbox drops it). Here the relay must publish each pending event once.
    await until('connector and task paused', async () => {
      const status = await connectorStatus(config);
      return status.state === 'PAUSED' && status.tasks.length > 0 && status.tasks.every((t) => t.state === 'PAUSED');
    });
    const pending = await write(pool, 't', 12);
    const report = await switchToRelay(config, { log: createLogger({ level: 'silent' }) });
    expect(report.stopped).toBe(true);
    expect(report.leftForRelay).toBe(12);
    expect(report.unpublishedTransactions).toBe(1);
    // `before` may have been deleted by no one here (no cleanup ran since): they are marked published.
    const { rows } = await pool.query<{ id: string; published: boolean }>('SELECT id::text, published_at IS NOT NULL AS published FROM outbox WHERE id = ANY($1::uuid[])', [[...before, ...pending]]);
    expect(rows.filter((r) => r.published).map((r) => r.id).sort()).toEqual([...before].sort());
    expect(rows.filter((r) => !r.published).map((r) => r.id).sort()).toEqual([...pending].sort());

    relay = createRelay({ config, topicFor: topicForReplacement(config.connector.topicReplacement), logger: createLogger({ level: 'silent' }), settings: { pollIntervalMs: 20 } });
    await relay.start();
    await until('the relay published the rest', async () => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL')).rows[0]!.n, (n) => n === 0);
    await new Promise((r) => setTimeout(r, 2_000));
    // Every event is on the topic. The relay published each pending one exactly once (the stopped
    // connector never read them). CDC's own records may repeat (at least once across the earlier
    // pause and resume: CI once saw 6 of 57); what the switch must not do, re-publish the CDC era,
    // is checked above by the rows it marked, and the relay publishes only unmarked rows.
    const records = await collect([topic], (rs) => [...before, ...pending].every((id) => rs.some((r) => r.headers.id === id)), 90_000);
    const count = (id: string) => records.filter((r) => r.headers.id === id).length;
    expect(pending.map(count)).toEqual(pending.map(() => 1));
    expect(before.every((id) => count(id) >= 1)).toBe(true);
  });
});
