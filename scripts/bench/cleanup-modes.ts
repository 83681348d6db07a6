#!/usr/bin/env node
/**
 * What each way of keeping the CDC outbox small costs the writer and the WAL (docs/operations.md,
 * "Partitioned outbox"), side by side in one run on one PostgreSQL:
 *
 *   business   the business row alone (the reference for the ratio);
 *   delete     business row + outbox row; the cleanup deletes confirmed rows behind the slot (default);
 *   same-tx    business row + outbox row inserted and deleted in the same transaction (deleteAfterInsert);
 *   partition  business row + outbox row into the partitioned outbox; confirmed partitions are dropped.
 *
 * Each mode has its own throw-away database with a pgoutput slot on the outbox publication, read (and
 * so confirmed) every 500 ms by pg_logical_slot_get_binary_changes, standing in for Debezium; the
 * cleanup (delete, partition) runs every second as the watchdog would. A phase: CHECKPOINT, WAL position,
 * `--seconds` of writing at `--concurrency`, then the drain (read the slot, clean up until the outbox
 * is empty), WAL position. WAL bytes per transaction is that difference over the phase's transactions:
 * the row, its cleanup, the VACUUM of the dead rows (autovacuum is off on the benchmark's tables, except
 * the partitions, which it analyzes) and the bookkeeping, with the full-page images of one fresh checkpoint. Modes
 * alternate over `--rounds` after a warm-up phase of each. Needs `npm run build`; then:
 *
 *   PGPORT=... node build/scripts/bench/cleanup-modes.js [--seconds 10] [--rounds 2] [--concurrency 4]
 */
import { Command, Option } from 'commander';
import type { Pool } from 'pg';
import { registerCleanupSlot, runOutboxCleanup } from 'outbox-router/cleanup';
import { createCodec, JSON_CONTENT_TYPE } from 'outbox-router/codec';
import type { OutboxConfig, OutboxOptions } from 'outbox-router/config';
import { qualified } from 'outbox-router/db';
import { createOutboxWriter, type OutboxWriter } from 'outbox-router/producer';
import { createBenchDatabase, type BenchDatabase } from './bench-db';
import { measureWriter } from './writer-overhead';

type Mode = 'business' | 'delete' | 'same-tx' | 'partition';
const MODES: Mode[] = ['business', 'delete', 'same-tx', 'partition'];

interface Phase {
  mode: Mode;
  transactions: number;
  tps: number;
  walBytes: number;
  drainMs: number;
}

interface Setup {
  mode: Mode;
  db: BenchDatabase;
  writer: OutboxWriter | undefined;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function setUp(mode: Mode, partitionSeconds: number): Promise<Setup> {
  // Slots are the cluster's: one name per mode.
  const connector = { slotName: `outbox_bench_${mode.replace('-', '_')}` };
  const overrides: OutboxOptions =
    mode === 'partition' ? { connector, outbox: { cleanupMode: 'partition', partitionSeconds, partitionsAhead: Math.ceil(60 / partitionSeconds) } } : { connector };
  const db = await createBenchDatabase(overrides, `${mode.replace('-', '_')}_${Date.now().toString(36)}`);
  await db.pool.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [db.config.connector.slotName]);
  await registerCleanupSlot(db.pool, db.config.outbox, db.config.connector.slotName, 'bench');
  const writer =
    mode === 'business'
      ? undefined
      : createOutboxWriter({ outbox: db.config.outbox, codec: createCodec({ registry: db.config.registry }), contentType: JSON_CONTENT_TYPE, deleteAfterInsert: mode === 'same-tx' });
  // Autovacuum off where a table option allows it (not on a partitioned root): a vacuum of one mode's
  // table must not land in another mode's WAL window. The drain vacuums the outbox itself instead.
  const outbox = qualified(db.config.outbox.schema, db.config.outbox.table);
  await db.pool.query('ALTER TABLE orders SET (autovacuum_enabled = false)');
  if (mode !== 'partition') await db.pool.query(`ALTER TABLE ${outbox} SET (autovacuum_enabled = false)`);
  const setup = { mode, db, writer };
  // The first run records the slot's floor before any event, as connector:deploy does: rows from before it stay.
  await cleanUp(setup);
  return setup;
}

/** Reads the slot to its end, which confirms what it read (Debezium's part). */
async function readSlot(pool: Pool, config: OutboxConfig): Promise<void> {
  await pool.query("SELECT count(*) FROM pg_logical_slot_get_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)", [
    config.connector.slotName,
    config.outbox.publication,
  ]);
}

async function cleanUp(s: Setup): Promise<void> {
  if (s.mode !== 'delete' && s.mode !== 'partition') return;
  await runOutboxCleanup(s.db.pool, { outbox: s.db.config.outbox, slotName: s.db.config.connector.slotName, batchSize: 5000, maxBatches: 100 });
}

async function outboxRows(s: Setup): Promise<number> {
  const { rows } = await s.db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${qualified(s.db.config.outbox.schema, s.db.config.outbox.table)}`);
  return Number(rows[0]?.n ?? 0);
}

async function phase(s: Setup, seconds: number, concurrency: number): Promise<Phase> {
  const pool = s.db.pool;
  await pool.query('CHECKPOINT');
  const lsn = async () => (await pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]!.lsn;
  const start = await lsn();
  // Partitions ahead: no cleanup ran for this database during the other modes' phases.
  await cleanUp(s);
  let writing = true;
  const background = (async () => {
    let tick = 0;
    while (writing) {
      await sleep(500);
      await readSlot(pool, s.db.config);
      if (++tick % 2 === 0) await cleanUp(s);
    }
  })().catch((error: unknown) => error);
  const run = await measureWriter(pool, s.mode, s.writer, concurrency, seconds, undefined, 'statement').finally(() => {
    writing = false;
  });
  const failed = await background;
  if (failed) throw failed instanceof Error ? failed : new Error(String(failed));
  const drainStarted = Date.now();
  // Drained: the slot has read everything and the cleanup has removed every row (a partition goes once
  // its window has ended a window ago, so partition mode waits up to two windows).
  while ((await outboxRows(s)) > 0) {
    if (Date.now() - drainStarted > 120_000) throw new Error(`${s.mode}: the outbox still has rows 120 s after writing stopped`);
    await readSlot(pool, s.db.config);
    await sleep(1_100); // the slot's statistics reach pg_stat_replication_slots within a second
    await cleanUp(s);
  }
  await readSlot(pool, s.db.config);
  // Deleted rows (the DELETE cleanup's, and insert-then-delete's) are dead tuples until a vacuum: its WAL
  // is part of what deleting costs. A dropped partition leaves none.
  if (s.mode === 'delete' || s.mode === 'same-tx') await pool.query(`VACUUM ${qualified(s.db.config.outbox.schema, s.db.config.outbox.table)}`);
  const end = await lsn();
  const { rows } = await pool.query<{ bytes: string }>('SELECT pg_wal_lsn_diff($1, $2)::text AS bytes', [end, start]);
  return { mode: s.mode, transactions: run.transactions, tps: run.tps, walBytes: Number(rows[0]!.bytes), drainMs: Date.now() - drainStarted };
}

async function main(options: { seconds: number; rounds: number; concurrency: number; partitionSeconds: number; json: boolean }): Promise<void> {
  const setups: Setup[] = [];
  try {
    for (const mode of MODES) setups.push(await setUp(mode, options.partitionSeconds));
    const { rows } = await setups[0]!.db.pool.query<{ v: string }>("SELECT current_setting('server_version') AS v");
    process.stderr.write(`PostgreSQL ${rows[0]?.v}; warm-up (${Math.min(3, options.seconds)} s per mode)\n`);
    for (const s of setups) await phase(s, Math.min(3, options.seconds), options.concurrency);
    const phases: Phase[] = [];
    for (let round = 1; round <= options.rounds; round++) {
      for (const s of setups) {
        const p = await phase(s, options.seconds, options.concurrency);
        phases.push(p);
        process.stderr.write(`round ${round} ${p.mode}: ${p.tps.toFixed(0)} tx/s, ${(p.walBytes / p.transactions).toFixed(0)} WAL bytes/tx, drained in ${p.drainMs} ms\n`);
      }
    }
    const summary = MODES.map((mode) => {
      const mine = phases.filter((p) => p.mode === mode);
      const tx = mine.reduce((n, p) => n + p.transactions, 0);
      const tps = mine.reduce((n, p) => n + p.tps, 0) / mine.length;
      return { mode, transactions: tx, tps, walBytesPerTx: mine.reduce((n, p) => n + p.walBytes, 0) / tx };
    });
    const base = summary.find((r) => r.mode === 'business')!;
    const table = summary.map((r) => ({
      ...r,
      ratio: r.tps / base.tps,
      outboxWalBytesPerEvent: r.mode === 'business' ? 0 : r.walBytesPerTx - base.walBytesPerTx,
    }));
    if (options.json) {
      process.stdout.write(`${JSON.stringify({ options, phases, summary: table })}\n`);
      return;
    }
    process.stdout.write('mode        tx/s    ratio  WAL B/tx  outbox WAL B/event\n');
    for (const r of table) {
      process.stdout.write(
        `${r.mode.padEnd(10)} ${r.tps.toFixed(0).padStart(6)}  ${r.ratio.toFixed(2).padStart(6)}  ${r.walBytesPerTx.toFixed(0).padStart(8)}  ${r.mode === 'business' ? '' : r.outboxWalBytesPerEvent.toFixed(0).padStart(18)}\n`,
      );
    }
  } finally {
    for (const s of setups) await s.db.drop().catch(() => {});
  }
}

const program = new Command('cleanup-modes')
  .description('Writer throughput ratio and WAL bytes per event for the three ways of cleaning the CDC outbox (DELETE behind the slot, insert-then-delete, partition drop).')
  .addOption(new Option('--seconds <n>', 'writing time per phase').default(10).argParser(Number))
  .addOption(new Option('--rounds <n>', 'measured phases per mode, alternating modes').default(2).argParser(Number))
  .addOption(new Option('--concurrency <n>', 'writer connections').default(4).argParser(Number))
  .addOption(new Option('--partition-seconds <n>', 'partition window of the partition mode (short, so drops happen within a phase)').default(2).argParser(Number))
  .option('--json', 'one JSON object instead of the table', false)
  .action(async (opts: { seconds: number; rounds: number; concurrency: number; partitionSeconds: number; json: boolean }) => {
    for (const [name, value] of Object.entries({ seconds: opts.seconds, rounds: opts.rounds, concurrency: opts.concurrency, 'partition-seconds': opts.partitionSeconds })) {
      if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a whole number of at least 1, got ${value}`);
    }
    await main(opts);
  });

program.parseAsync().catch((error: unknown) => {
  process.stderr.write(`cleanup-modes: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
