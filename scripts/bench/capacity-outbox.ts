/**
 * The CDC outbox part of the capacity bench (capacity.ts): one cleanup mode at a time (outbox.cleanupMode
 * delete: runOutboxCleanup's DELETE behind the slot; partition: the partitioned outbox of migration 015,
 * a confirmed hourly partition dropped per call), each in its own throw-away database holding `rows`
 * rows that the slot has confirmed: the backlog a connector leaves behind after an outage, which the
 * cleanup then has to remove.
 *
 * The slot is a pgoutput slot made before the rows, so the cleanup's proof (migrations 011, 012, 015)
 * holds for them: the first cleanup call records the floor before the first row. While loading, the slot
 * is moved along with pg_replication_slot_advance (it confirms without decoding into output, so the
 * loader's WAL can be recycled: Debezium reading 100 million rows is not what is measured here); then a
 * one-row transaction read with pg_logical_slot_get_binary_changes, as in cleanup-modes.ts, confirms the
 * cleanup's mark twice, so the rows are provably read. Then `runs` cleanup runs are measured, a probe
 * writer inserting one outbox row at a time beside them.
 */
import type { Pool } from 'pg';
import { registerCleanupSlot, runOutboxCleanup, type OutboxCleanupRun } from 'outbox-router/cleanup';
import type { OutboxOptions } from 'outbox-router/config';
import { qualified } from 'outbox-router/db';
import { createBenchDatabase } from './bench-db';
import { diskFree, gb, load, measured, say, startProbe, tableSize, vacuum, type LoadResult, type ProbeResult, type TableSize } from './capacity-db';
import { outboxChunkSql, outboxWindowSql, uuidv7, type Span } from './capacity-sql';

const HOUR_S = 3600;
const BATCH = 5_000;
const MAX_BATCHES = 100;

export interface CleanupMeasure {
  run: number;
  rows: number;
  partitionsDropped: number;
  statements: number;
  ms: number;
  walBytes: number;
}

export interface OutboxResult {
  mode: 'delete' | 'partition';
  load: LoadResult;
  vacuumMs: number;
  size: TableSize;
  diskFreeBytes: number;
  runs: CleanupMeasure[];
  /** delete mode: the VACUUM the deleted rows need afterwards. */
  vacuumAfter?: { ms: number; walBytes: number };
  probe: ProbeResult;
}

export interface OutboxRun {
  rows: number;
  chunkRows: number;
  workers: number;
  runs: number;
  startMs: number;
  nowMs: number;
  overrides: OutboxOptions;
}

export async function runOutbox(mode: 'delete' | 'partition', run: OutboxRun, track: (drop: () => Promise<void>) => void): Promise<OutboxResult> {
  const slotName = `capacity_${mode}_${Date.now().toString(36)}`;
  const outboxOverrides = mode === 'partition' ? { cleanupMode: 'partition' as const, partitionSeconds: HOUR_S, partitionsAhead: 3 } : { cleanupMode: 'delete' as const };
  const db = await createBenchDatabase({ ...run.overrides, connector: { slotName }, outbox: outboxOverrides }, `cap_outbox_${mode}_${Date.now().toString(36)}`);
  track(db.drop);
  try {
    const config = db.config;
    const outbox = qualified(config.outbox.schema, config.outbox.table);
    const cleanupOptions = (maxBatches: number) => ({ outbox: { ...config.outbox }, slotName, batchSize: BATCH, maxBatches });
    const one = () =>
      `INSERT INTO ${outbox} (id, aggregate_type, aggregate_id, event_type, payload, content_type) VALUES ('${uuidv7(Date.now())}', 'Order', 'probe', 'OrderCreated', '\\x7b7d', 'application/json')`;
    const readSlot = () =>
      db.pool.query("SELECT count(*) FROM pg_logical_slot_get_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)", [slotName, config.outbox.publication]);
    const confirm = async () => {
      await db.pool.query(one());
      await readSlot();
      await new Promise((resolve) => setTimeout(resolve, 1_100)); // the slot's statistics reach pg_stat_replication_slots within a second
    };
    await db.pool.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [slotName]);
    await registerCleanupSlot(db.pool, config.outbox, slotName, 'capacity-bench');
    if (mode === 'partition') {
      // The past hours' partitions (capacity-sql.ts outboxWindowSql); the cleanup made the current ones.
      for (let lo = run.startMs - (run.startMs % (HOUR_S * 1000)); lo < run.nowMs; lo += HOUR_S * 1000) {
        await db.pool.query(outboxWindowSql(config.outbox.schema, config.outbox.table, lo, HOUR_S * 1000));
      }
    }
    await confirm(); // the slot's statistics row, without which the cleanup refuses (statistics-missing)
    const first = await runOutboxCleanup(db.pool, cleanupOptions(1)); // the floor, before every row
    if (first.refused) throw new Error(`outbox ${mode}: the first cleanup run refused (${first.refused})`);
    const span: Span = { startMs: run.startMs, spanMs: run.nowMs - run.startMs, rows: run.rows, salt: mode };
    const advance = async () => void (await db.pool.query('SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())', [slotName]));
    const loaded = await load(db.pool, `outbox ${mode}`, run.rows, run.chunkRows, run.workers, (lo, hi) => outboxChunkSql(outbox, span, lo, hi), advance);
    say(`outbox ${mode}: VACUUM (ANALYZE)`);
    const vac = await vacuum(db.pool, outbox);
    const size = await tableSize(db.pool, outbox);
    const diskFreeBytes = await diskFree(db.pool);
    say(`outbox ${mode}: ${size.rows.toLocaleString('en')} rows, ${gb(size.totalBytes)} (heap ${gb(size.heapBytes)}, indexes ${gb(size.indexBytes)}), ${size.partitions} partitions; ${gb(diskFreeBytes)} free on disk`);
    // The mark before the rows is confirmed (it proves nothing about them); the next run takes one after
    // them, and the slot confirms that one too.
    await confirm();
    await runOutboxCleanup(db.pool, cleanupOptions(1));
    await confirm();
    const oldestHours = mode === 'partition' ? await oldestPartitionRows(db.pool, outbox, run.runs) : [];
    await db.pool.query('CHECKPOINT');
    say(`outbox ${mode}: ${run.runs} cleanup runs beside ${run.rows.toLocaleString('en')} rows`);
    const probe = startProbe(db.pool, one);
    const runs: CleanupMeasure[] = [];
    let vacuumAfter: { ms: number; walBytes: number } | undefined;
    let probed: ProbeResult | undefined;
    try {
      for (let i = 1; i <= run.runs; i++) {
        // delete: one run as the watchdog makes it (100 statements of 5,000 rows at most); partition: one
        // call, which drops the oldest confirmed partition (a watchdog run repeats it up to 100 times).
        const m = await measured(db.pool, () => runOutboxCleanup(db.pool, cleanupOptions(mode === 'delete' ? MAX_BATCHES : 1)));
        const r: OutboxCleanupRun = m.result;
        if (r.refused) throw new Error(`outbox ${mode}: cleanup run ${i} refused (${r.refused})`);
        const dropped = r.partitions?.dropped ?? 0;
        const rows = mode === 'delete' ? r.deleted : (oldestHours[i - 1] ?? 0) * Math.min(1, dropped);
        runs.push({ run: i, rows, partitionsDropped: dropped, statements: r.batches, ms: m.ms, walBytes: m.walBytes });
        say(`outbox ${mode}: run ${i}: ${rows.toLocaleString('en')} rows${mode === 'partition' ? ` (${dropped} partition)` : ''} in ${m.ms.toFixed(0)} ms, ${gb(m.walBytes)} WAL`);
      }
      if (mode === 'delete') {
        say('outbox delete: VACUUM after the cleanup runs');
        vacuumAfter = await vacuum(db.pool, outbox);
      }
    } finally {
      probed = await probe.stop();
    }
    return { mode, load: loaded, vacuumMs: vac.ms, size, diskFreeBytes, runs, vacuumAfter, probe: probed };
  } finally {
    say(`outbox ${mode}: dropping the bench database`);
    await db.drop();
  }
}

/** The rows of the `n` oldest partitions, oldest first (what `n` one-partition runs drop). */
async function oldestPartitionRows(pool: Pool, outbox: string, n: number): Promise<number[]> {
  const { rows } = await pool.query<{ rel: string }>(
    "SELECT c.oid::regclass::text AS rel FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass ORDER BY pg_get_expr(c.relpartbound, c.oid) LIMIT $2",
    [outbox, n],
  );
  const out: number[] = [];
  for (const r of rows) out.push(Number((await pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${r.rel}`)).rows[0]!.n));
  return out;
}
