/**
 * The inbox part of the capacity bench (capacity.ts): one form at a time (one table, pruned by DELETE;
 * or partitioned by day, pruned by dropping a partition), each in its own throw-away database:
 *
 * 1. the router's INSERT (capacity-sql.ts routerInboxInsertSql) into the empty inbox;
 * 2. `rows` rows over `days` days, made in the database (capacity-sql.ts inboxChunkSql), then VACUUM (ANALYZE);
 * 3. the router's INSERT again, now beside those rows;
 * 4. the prune of the oldest day, the router's own code: pruneInbox (DELETE in batches of 5,000, runs of
 *    at most 1,000 statements, run after run until a run comes back short), then the VACUUM its dead rows
 *    need; or prunePartitionedInbox (the day's partition dropped through migration 016's function). A
 *    probe writer inserts one event at a time meanwhile (capacity-db.ts startProbe).
 */
import { escapeLiteral, type Pool } from 'pg';
import { createBenchDatabase } from './bench-db';
import type { OutboxOptions } from 'outbox-router/config';
import { clientConfig, inboxKeyFunction, qualified, withClient } from 'outbox-router/db';
import { inboxPartitionNames, parkedTableName } from 'outbox-router/provision';
import { convertInbox, prunePartitionedInbox, pruneInbox, type PartitionDropResult, type PruneResult } from 'outbox-router/router';
import { diskFree, gb, load, measured, say, startProbe, tableSize, vacuum, type LoadResult, type ProbeResult, type TableSize } from './capacity-db';
import { inboxChunkSql, routerInboxInsertSql, uuidv7, type Span } from './capacity-sql';

export const DAY_MS = 86_400_000;
const CONSUMER = 'capacity-bench';
const PRUNE_BATCH = 5_000;
const PRUNE_MAX_BATCHES = 1_000;

export interface InsertCost {
  batch: number;
  events: number;
  usPerEvent: number;
  walBytesPerEvent: number;
}

export interface InboxPrune {
  rows: number;
  ms: number;
  walBytes: number;
  /** DELETE: the statements and runs; drop: the function's lock figures. */
  statements?: number;
  runs?: number;
  vacuumMs?: number;
  vacuumWalBytes?: number;
  lockWaitMs?: number;
  partitionHeldMs?: number;
  inboxHeldMs?: number;
  probe: ProbeResult;
}

export interface InboxResult {
  form: 'plain' | 'partitioned';
  load: LoadResult;
  vacuumMs: number;
  size: TableSize;
  diskFreeBytes: number;
  insertEmpty: InsertCost[];
  insertFull: InsertCost[];
  prune: InboxPrune;
}

export interface InboxRun {
  rows: number;
  chunkRows: number;
  workers: number;
  insertEvents: number;
  /** [D0, nowMs): D0 the UTC midnight `days` days before today's. */
  startMs: number;
  nowMs: number;
  overrides: OutboxOptions;
}

export async function runInbox(form: 'plain' | 'partitioned', run: InboxRun, track: (drop: () => Promise<void>) => void): Promise<InboxResult> {
  const db = await createBenchDatabase(run.overrides, `cap_inbox_${form}_${Date.now().toString(36)}`);
  track(db.drop);
  try {
    const { schema, inboxTable } = db.config.outbox;
    const inbox = qualified(schema, inboxTable);
    if (form === 'partitioned') {
      // The product's conversion (outbox inbox:partition) of the empty inbox, on a clock set just before
      // the data's first day so its cutover is that day: every generated id maps to its time partition.
      const days = Math.ceil((run.nowMs - run.startMs) / DAY_MS);
      await withClient(clientConfig(db.config.database), (c) =>
        convertInbox(c, { schema, inboxTable, routerRole: db.config.roles.router, intervalMs: DAY_MS, ahead: days + 3, now: () => run.startMs - DAY_MS - 1 }),
      );
    }
    const keyFn = await inboxKeyFunction(db.pool, inbox);
    const consumer = escapeLiteral(CONSUMER);
    say(`inbox ${form}: the router's INSERT into the empty inbox`);
    const insertEmpty = await insertCosts(db.pool, inbox, consumer, keyFn, run.insertEvents);
    const span: Span = { startMs: run.startMs, spanMs: run.nowMs - run.startMs, rows: run.rows, salt: form };
    const loaded = await load(db.pool, `inbox ${form}`, run.rows, run.chunkRows, run.workers, (lo, hi) => inboxChunkSql(inbox, CONSUMER, span, lo, hi, form === 'partitioned'));
    say(`inbox ${form}: VACUUM (ANALYZE)`);
    const vac = await vacuum(db.pool, inbox);
    const size = await tableSize(db.pool, inbox);
    const diskFreeBytes = await diskFree(db.pool);
    say(`inbox ${form}: ${size.rows.toLocaleString('en')} rows, ${gb(size.totalBytes)} (heap ${gb(size.heapBytes)}, indexes ${gb(size.indexBytes)}), ${size.partitions} partitions; ${gb(diskFreeBytes)} free on disk`);
    say(`inbox ${form}: the router's INSERT beside ${run.rows.toLocaleString('en')} rows`);
    const insertFull = await insertCosts(db.pool, inbox, consumer, keyFn, run.insertEvents);
    const probeSql = () => `${routerInboxInsertSql(inbox, consumer, keyFn, [uuidv7(Date.now())])}; COMMIT`;
    const parked = qualified(schema, parkedTableName(inboxTable));
    // The oldest day goes: the window ends a minute into the next day, so that day's partition is past it.
    const before = run.startMs + DAY_MS + 60_000;
    await db.pool.query('CHECKPOINT');
    say(`inbox ${form}: pruning the oldest day (${new Date(run.startMs).toISOString().slice(0, 10)})`);
    const probe = startProbe(db.pool, probeSql);
    let prune: InboxPrune;
    try {
      prune = form === 'plain' ? await deletePrune(db.pool, inbox, parked, before, probe) : await dropPrune(db.pool, schema, inboxTable, parked, before, probe);
    } finally {
      await probe.stop().catch(() => undefined);
    }
    if (form === 'plain') {
      say(`inbox plain: VACUUM after the DELETE prune`);
      const v = await vacuum(db.pool, inbox);
      prune = { ...prune, vacuumMs: v.ms, vacuumWalBytes: v.walBytes };
    }
    return { form, load: loaded, vacuumMs: vac.ms, size, diskFreeBytes, insertEmpty, insertFull, prune };
  } finally {
    say(`inbox ${form}: dropping the bench database`);
    await db.drop();
  }
}

/** The router's INSERT, `events` new events in transactions of 100 (a batch handler's batch) and 1 (one event per transaction). */
async function insertCosts(pool: Pool, inbox: string, consumer: string, keyFn: string | null, events: number): Promise<InsertCost[]> {
  const out: InsertCost[] = [];
  for (const [batch, n] of [
    [100, events],
    [1, Math.max(1, Math.round(events / 10))],
  ] as const) {
    await pool.query('CHECKPOINT');
    const client = await pool.connect();
    try {
      const m = await measured(pool, async () => {
        for (let i = 0; i < n; i += batch) {
          const ids = Array.from({ length: Math.min(batch, n - i) }, () => uuidv7(Date.now()));
          await client.query(routerInboxInsertSql(inbox, consumer, keyFn, ids));
          await client.query('COMMIT');
        }
      });
      out.push({ batch, events: n, usPerEvent: (m.ms * 1000) / n, walBytesPerEvent: m.walBytes / n });
    } finally {
      client.release();
    }
  }
  return out;
}

async function deletePrune(pool: Pool, inbox: string, parked: string, beforeMs: number, probe: { stop(): Promise<ProbeResult> }): Promise<InboxPrune> {
  const runs: PruneResult[] = [];
  const m = await measured(pool, async () => {
    for (;;) {
      const r = await pruneInbox(pool, { inboxTable: inbox, parkedTable: parked, consumer: CONSUMER, retentionMs: Date.now() - beforeMs, batchSize: PRUNE_BATCH, maxBatches: PRUNE_MAX_BATCHES });
      runs.push(r);
      say(`inbox plain: prune run ${runs.length}: ${r.deleted.toLocaleString('en')} rows in ${r.batches} statements, ${(r.ms / 1000).toFixed(1)} s`);
      if (r.deleted < PRUNE_BATCH * PRUNE_MAX_BATCHES) break;
    }
  });
  const rows = runs.reduce((n, r) => n + r.deleted, 0);
  return { rows, ms: m.ms, walBytes: m.walBytes, statements: runs.reduce((n, r) => n + r.batches, 0), runs: runs.length, probe: await probe.stop() };
}

async function dropPrune(pool: Pool, schema: string, inboxTable: string, parked: string, beforeMs: number, probe: { stop(): Promise<ProbeResult> }): Promise<InboxPrune> {
  const m = await measured(pool, () =>
    prunePartitionedInbox(pool, {
      inboxTable: qualified(schema, inboxTable),
      parkedTable: parked,
      fns: inboxPartitionNames({ schema, inboxTable }),
      consumer: CONSUMER,
      retentionMs: Date.now() - beforeMs,
      intervalMs: DAY_MS,
      ahead: 3,
      lockTimeoutMs: 200,
      batchSize: PRUNE_BATCH,
    }),
  );
  const drop: PartitionDropResult | undefined = m.result.drop;
  if (!drop || drop.dropped !== 1) throw new Error(`inbox partitioned: expected the oldest day's partition dropped, got ${JSON.stringify(drop)}`);
  say(`inbox partitioned: dropped ${drop.names.join(', ')} (${drop.rows.toLocaleString('en')} rows) in ${m.ms.toFixed(0)} ms; partition held ${drop.heldMs.toFixed(1)} ms, inbox held ${drop.dropMs.toFixed(1)} ms`);
  return {
    rows: drop.rows + (m.result.delete?.deleted ?? 0),
    ms: m.ms,
    walBytes: m.walBytes,
    statements: m.result.delete?.batches ?? 0,
    lockWaitMs: drop.lockWaitMs,
    partitionHeldMs: drop.heldMs,
    inboxHeldMs: drop.dropMs,
    probe: await probe.stop(),
  };
}
