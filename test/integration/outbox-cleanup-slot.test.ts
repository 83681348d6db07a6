/**
 * The outbox cleanup's slot rules of migration 012 on slots moved by hand: only a registered slot is
 * proof; a slot dropped and re-created under the same name between two runs never makes the rows it
 * did not read look confirmed; the rows below the floor have a guarded way out; and the watchdog's
 * backlog under CDC is what the slot has not confirmed, not the oldest row left in the table.
 * `pg_logical_slot_get_binary_changes` plays the connector: it decodes (so the slot's statistics
 * count the transactions, as Debezium's do) and confirms what it read.
 */
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { runBelowFloorCleanup, runOutboxCleanup, type OutboxCleanupRun } from '../../src/cleanup';
import type { OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { provision } from '../../src/provision';
import { createWatchdog, sampleOutbox } from '../../src/watchdog';
import { evaluateOutboxRule } from '../../src/watchdog/outbox-rules';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomIdentifier, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(120_000);

describe('outbox cleanup: registered slots, re-created slots, rows below the floor', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;

  beforeAll(async () => {
    db = await freshDatabase('cleanupslot');
    config = testConfig(db.name);
    await provision(config);
    pool = createPool(config.database, { max: 4 });
  });
  afterAll(async () => {
    await pool?.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = current_database()').catch(() => {});
    await pool?.end();
    await db?.drop();
  });

  /** `n` events in one transaction, created `ageSeconds` ago (the table owner may back-date). */
  async function write(n: number, ageSeconds = 0): Promise<string[]> {
    const ids = Array.from({ length: n }, () => randomUUID());
    await pool.query(
      `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type, created_at)
       SELECT id, 'order', 'a', 'OrderPlaced', convert_to('{}', 'UTF8'), 'application/json', now() - $2::float8 * interval '1 second' FROM unnest($1::uuid[]) AS id`,
      [ids, ageSeconds],
    );
    return ids;
  }
  const present = async (ids: string[]) => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE id = ANY($1::uuid[])', [ids])).rows[0]!.n;
  const cleanup = (slot: string): Promise<OutboxCleanupRun> => runOutboxCleanup(pool, { outbox: config.outbox, slotName: slot, batchSize: 1_000, maxBatches: 10 });
  const createSlot = (slot: string) => pool.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [slot]);
  const dropSlot = (slot: string) => pool.query('SELECT pg_drop_replication_slot($1)', [slot]);
  /** The connector reading and confirming everything committed so far. */
  const read = (slot: string) =>
    pool.query("SELECT count(*) FROM pg_logical_slot_get_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)", [slot, config.outbox.publication]);
  /** The documented registration by hand (docs/operations.md, "Outbox cleanup under CDC"). */
  const register = (slot: string) => pool.query("INSERT INTO outbox_cleanup_registrations (slot_name, registered_by) VALUES ($1, 'manual')", [slot]);
  const state = async (slot: string) => (await pool.query('SELECT * FROM outbox_cleanup_slots WHERE slot_name = $1', [slot])).rows[0] as Record<string, unknown> | undefined;

  it('an unregistered logical slot proves nothing: nothing deleted, nothing recorded, and it says why', async () => {
    const slot = randomIdentifier('unreg');
    await createSlot(slot);
    try {
      expect(await cleanup(slot)).toMatchObject({ slotFound: true, deleted: 0, refused: 'unregistered', pendingLsn: null });
      const rows = await write(4);
      for (let i = 0; i < 4; i++) {
        await read(slot);
        const run = await cleanup(slot);
        expect(run).toMatchObject({ slotFound: true, deleted: 0, refused: 'unregistered', pendingLsn: null });
      }
      expect(await present(rows)).toBe(4);
      expect(await state(slot)).toBeUndefined();
      expect(await runBelowFloorCleanup(pool, { outbox: config.outbox, slotName: slot, batchSize: 100, dryRun: false })).toMatchObject({ rows: 0, refused: 'unregistered' });

      // Registered by hand, the same slot is proof from its new floor up.
      await register(slot);
      expect((await cleanup(slot)).refused).toBeNull();
      const later = await write(3);
      for (let i = 0; i < 3; i++) {
        await read(slot);
        await cleanup(slot);
      }
      expect(await present(later)).toBe(0);
      expect(await present(rows)).toBe(4); // below the floor: written before the cleanup first took the slot as proof
      await pool.query('DELETE FROM outbox');
    } finally {
      await dropSlot(slot);
    }
  });

  it('a slot dropped and re-created under the same name between two runs: the row the old slot never read survives', async () => {
    const slot = randomIdentifier('recreate');
    await register(slot);
    await createSlot(slot);
    expect(await cleanup(slot)).toMatchObject({ deleted: 0, refused: null }); // floor and the first mark
    const streamed = await write(5);
    await read(slot);
    await cleanup(slot); // the first mark confirmed; the next one taken after `streamed`
    await read(slot);
    expect((await cleanup(slot)).deleted).toBe(5);
    expect(await present(streamed)).toBe(0);

    // Written, never read: then the slot is dropped and a new one made under the name (a failover
    // without failover slots, a manual drop and re-deploy). The new slot starts beyond every old mark.
    const unread = await write(1, 7_200);
    await dropSlot(slot);
    await createSlot(slot);
    const first = await cleanup(slot);
    expect(first).toMatchObject({ slotFound: true, deleted: 0, refused: 'recreated' });
    expect(await runBelowFloorCleanup(pool, { outbox: config.outbox, slotName: slot, batchSize: 100, dryRun: true })).toMatchObject({ rows: 0, refused: 'no-confirmed-mark' });
    for (let i = 0; i < 4; i++) {
      await read(slot);
      const run = await cleanup(slot);
      expect(run.refused).toBeNull();
    }
    expect(await present(unread)).toBe(1);

    // The new slot is proof for what it reads…
    const after = await write(2);
    for (let i = 0; i < 3; i++) {
      await read(slot);
      await cleanup(slot);
    }
    expect(await present(after)).toBe(0);

    // …and the watchdog's backlog under CDC is what the slot has not confirmed: the two-hour-old row
    // below the floor is not waiting for anything, so OutboxBacklogAge stays quiet; without the slot
    // it is the oldest row in the table.
    const table = { schema: config.outbox.schema, table: config.outbox.table };
    const plain = await sampleOutbox(pool, { ...table, backlogCap: 100 });
    expect(plain.oldestPendingAgeSeconds).toBeGreaterThanOrEqual(7_200);
    const cdc = await sampleOutbox(pool, { ...table, backlogCap: 100, cdcSlot: slot });
    expect(cdc.pendingError).toBeNull();
    expect(cdc.oldestPendingAgeSeconds).toBeLessThan(600);
    expect(evaluateOutboxRule('OutboxBacklogAge', cdc, config.watchdog, 'ok').level).toBe('ok');
    expect(evaluateOutboxRule('OutboxBacklogAge', plain, config.watchdog, 'ok').level).not.toBe('ok');
    // The watchdog's own poll (watchConnector: CDC) reads the same figure, and judges it quiet.
    const watchdog = createWatchdog({ config: { ...config, connector: { ...config.connector, slotName: slot } }, instant: true, deliver: false });
    try {
      await watchdog.pollOnce();
      const gauge = await watchdog.metrics.registry.getSingleMetricAsString('outbox_oldest_pending_age_seconds');
      expect(Number(/outbox_oldest_pending_age_seconds\{[^}]*\} (\S+)/.exec(gauge)?.[1])).toBeLessThan(600);
      expect(watchdog.statuses().filter((st) => st.rule === 'OutboxBacklogAge' && st.level !== 'ok')).toEqual([]);
    } finally {
      await watchdog.stop(0);
    }
    // A row the slot has not confirmed yet is waiting, and counted.
    const waiting = await write(1, 3_000);
    const pending = await sampleOutbox(pool, { ...table, backlogCap: 100, cdcSlot: slot });
    expect(pending.oldestPendingAgeSeconds).toBeGreaterThanOrEqual(3_000);
    expect(pending.pendingRows).toBe(1);
    await read(slot);
    await cleanup(slot);
    await read(slot);
    await cleanup(slot);
    expect(await present(waiting)).toBe(0);

    // The way out for the row below the floor: counted, then deleted, once the slot streams.
    expect(await runBelowFloorCleanup(pool, { outbox: config.outbox, slotName: slot, batchSize: 100, dryRun: true })).toMatchObject({ rows: 1, refused: null });
    expect(await present(unread)).toBe(1);
    expect(await runBelowFloorCleanup(pool, { outbox: config.outbox, slotName: slot, batchSize: 100, dryRun: false })).toMatchObject({ rows: 1, refused: null });
    expect(await present(unread)).toBe(0);
    await dropSlot(slot);
  });

  it('two callers judge one after the other: a call waits for the other caller before it reads the slot (no false re-creation)', async () => {
    const slot = randomIdentifier('race');
    await register(slot);
    await createSlot(slot);
    const other = await pool.connect();
    try {
      await cleanup(slot);
      await write(1);
      // Another caller is inside the function (it holds the slot's registration row) while the slot moves on.
      await other.query('BEGIN');
      await other.query('SELECT 1 FROM outbox_cleanup_registrations WHERE slot_name = $1 FOR UPDATE', [slot]);
      const waiting = runOutboxCleanup(pool, { outbox: config.outbox, slotName: slot, batchSize: 10, maxBatches: 1 });
      await new Promise((r) => setTimeout(r, 300));
      await read(slot);
      const moved = (await pool.query<{ lsn: string }>('SELECT confirmed_flush_lsn::text AS lsn FROM pg_replication_slots WHERE slot_name = $1', [slot])).rows[0]!.lsn;
      await other.query('COMMIT');
      // It read the slot after the other caller was done: the position it reports is the one after the move.
      const run = await waiting;
      expect(run.confirmedFlushLsn).toBe(moved);
      expect(run.refused ?? null).toBeNull();
    } finally {
      await other.query('ROLLBACK').catch(() => {});
      other.release();
      await dropSlot(slot);
    }
  });

  it('the below-floor one-off counts, and deletes nothing, when it is not told plainly to delete (p_dry_run NULL)', async () => {
    const slot = randomIdentifier('nulldry');
    await register(slot);
    await createSlot(slot);
    try {
      const below = await write(1);
      await cleanup(slot);
      await write(1);
      await read(slot);
      await cleanup(slot);
      await read(slot);
      await cleanup(slot);
      const { rows } = await pool.query<{ affected: string; refused: string | null }>('SELECT affected::text, refused FROM outbox_cleanup_below_floor($1, 100, NULL)', [slot]);
      expect(rows[0]).toMatchObject({ refused: null });
      expect(Number(rows[0]!.affected)).toBeGreaterThanOrEqual(1);
      expect(await present(below)).toBe(1);
    } finally {
      await dropSlot(slot);
    }
  });

  it('the backlog under CDC never counts a row below the floor, even one of a transaction that ran while the floor was taken', async () => {
    const slot = randomIdentifier('floorage');
    await register(slot);
    await createSlot(slot);
    const open = await pool.connect();
    try {
      // A transaction with an xid below the floor (it runs when the first run records it, and a later
      // transaction has ended by then, so the floor, a snapshot's xmax, is above it), that commits after.
      await open.query('BEGIN');
      const tx = BigInt((await open.query<{ x: string }>('SELECT pg_current_xact_id()::text AS x')).rows[0]!.x);
      await pool.query('SELECT pg_current_xact_id()');
      await cleanup(slot);
      expect(BigInt(String((await state(slot))?.floor_tx_id))).toBeGreaterThan(tx);
      const id = randomUUID();
      await open.query(
        `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type, created_at) VALUES ($1, 'order', 'a', 'OrderPlaced', convert_to('{}', 'UTF8'), 'application/json', now() - interval '2 hours')`,
        [id],
      );
      await open.query('COMMIT');
      // The slot confirms the first mark, whose snapshot_xmin is at or below that transaction's xid.
      await read(slot);
      await cleanup(slot);
      // The regular cleanup never deletes it (below the floor): so the backlog must not count it either.
      expect(await present([id])).toBe(1);
      const cdc = await sampleOutbox(pool, { schema: config.outbox.schema, table: config.outbox.table, backlogCap: 100, cdcSlot: slot });
      expect(cdc.pendingRows).toBe(0);
      expect(cdc.oldestPendingAgeSeconds).toBeLessThan(600);
    } finally {
      await open.query('ROLLBACK').catch(() => {});
      open.release();
      await dropSlot(slot);
    }
  });

  it('a slot whose statistics were reset is treated as re-created (the safe side)', async () => {
    const slot = randomIdentifier('reset');
    await register(slot);
    await createSlot(slot);
    try {
      await cleanup(slot);
      await write(1);
      await read(slot);
      expect((await cleanup(slot)).refused).toBeNull();
      await pool.query('SELECT pg_stat_reset_replication_slot($1)', [slot]);
      const kept = await write(1);
      expect((await cleanup(slot)).refused).toBe('recreated');
      for (let i = 0; i < 3; i++) {
        await read(slot);
        await cleanup(slot);
      }
      expect(await present(kept)).toBe(1);
    } finally {
      await dropSlot(slot);
    }
  });
});
