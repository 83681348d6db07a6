/**
 * `measureWatchdog()`: the two watchdog targets of docs/bench.md, for `npm run bench`.
 * 1. Database time per poll with N logical slots: EXPLAIN (ANALYZE) of the hot query (server time)
 *    and the client round trip, over many polls.
 * 2. Detection delay: WAL is written past a retained-bytes threshold behind an inactive slot while the
 *    watchdog polls; the delay from that write to the alert, in poll intervals.
 * Needs a superuser (the local stack's postgres: slots, CHECKPOINT). Slots are always dropped.
 * Run: `node dist/watchdog/measure.js`, or call it from `npm run bench`.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { loadConfig, type OutboxConfig } from '../config';
import { clientConfig } from '../db';
import { sleep } from '../retry';
import { createWatchdog } from './create-watchdog';
import { readSettings, slotQuerySql } from './slot-query';

export interface MeasureOptions {
  config?: OutboxConfig;
  slots?: number;
  polls?: number;
  intervalMs?: number;
  detections?: number;
}

export interface WatchdogMeasurement {
  slots: number;
  polls: number;
  serverMs: { p50: number; p95: number; max: number };
  roundTripMs: { p50: number; p95: number; max: number };
  intervalMs: number;
  /** One per detection run: delay from the breaching write to the alert, in poll intervals. */
  detectionIntervals: number[];
}

const pct = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
};
const summary = (v: number[]) => ({ p50: round(pct(v, 50)), p95: round(pct(v, 95)), max: round(Math.max(...v)) });
const round = (n: number) => Math.round(n * 1000) / 1000;

export async function measureWatchdog(options: MeasureOptions = {}): Promise<WatchdogMeasurement> {
  const config = options.config ?? loadConfig();
  const slotCount = options.slots ?? 10;
  const polls = options.polls ?? 200;
  const intervalMs = options.intervalMs ?? 200;
  const prefix = `wdbench_${randomBytes(4).toString('hex')}`;
  const client = new Client(clientConfig(config.database, { application_name: 'outbox-watchdog-bench' }));
  await client.connect();
  const created: string[] = [];
  try {
    for (let i = 0; i < slotCount; i++) {
      const name = `${prefix}_${i}`;
      await client.query("SELECT pg_create_logical_replication_slot($1, 'test_decoding')", [name]);
      created.push(name);
    }
    const settings = await readSettings(client);
    const sql = slotQuerySql(settings.versionNum);
    const server: number[] = [];
    const roundTrip: number[] = [];
    for (let i = 0; i < polls; i++) {
      const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`);
      const plan = (rows[0] as Record<string, Array<{ 'Execution Time': number; 'Planning Time': number }>>)['QUERY PLAN']?.[0];
      if (plan) server.push(plan['Execution Time'] + plan['Planning Time']);
      const t = performance.now();
      await client.query(sql);
      roundTrip.push(performance.now() - t);
    }

    const detectionIntervals: number[] = [];
    const probe = created[0] as string;
    for (let run = 0; run < (options.detections ?? 5); run++) {
      // restart_lsn moves only past a running-xacts record, which CHECKPOINT writes
      await client.query('SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())', [probe]);
      await client.query('CHECKPOINT');
      await client.query('SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())', [probe]);
      const { rows } = await client.query('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint AS r FROM pg_replication_slots WHERE slot_name = $1', [probe]);
      const base = Number((rows[0] as { r: string }).r);
      const wdConfig = loadConfig({
        env: {},
        overrides: {
          database: { ...config.database },
          watchdog: {
            intervalMs,
            slots: [probe],
            clearForMs: 0,
            rules: { retainedBytes: { warning: base + 4 * 1024 * 1024, critical: 1024 ** 4 }, retainedForMs: 0 },
          },
        },
      });
      let firedAt: number | null = null;
      const watchdog = createWatchdog({
        config: wdConfig,
        deliver: false,
        onEvent: (name, data) => {
          if (name === 'watchdog.alert' && data.rule === 'SlotRetainedHigh' && data.status === 'firing' && firedAt === null) firedAt = performance.now();
        },
      });
      watchdog.start();
      await sleep(intervalMs * 2 + Math.random() * intervalMs);
      if (firedAt !== null) throw new Error('measureWatchdog: the probe slot alerted before the breach (other WAL traffic?); run again on a quieter server');
      await client.query("SELECT pg_logical_emit_message(false, 'wdbench', repeat('x', 5 * 1024 * 1024))");
      // the breach exists once the WAL does: when the write returns
      const breachAt = performance.now();
      const deadline = performance.now() + intervalMs * 20;
      while (firedAt === null && performance.now() < deadline) await sleep(5);
      await watchdog.stop(0);
      detectionIntervals.push(firedAt === null ? Infinity : round(((firedAt as number) - breachAt) / intervalMs));
    }
    return { slots: slotCount, polls, serverMs: summary(server), roundTripMs: summary(roundTrip), intervalMs, detectionIntervals };
  } finally {
    for (const name of created) await client.query('SELECT pg_drop_replication_slot($1)', [name]).catch(() => {});
    await client.end().catch(() => {});
  }
}

if (require.main === module) {
  measureWatchdog()
    .then((m) => process.stdout.write(`${JSON.stringify(m, null, 2)}\n`))
    .catch((error: Error) => {
      process.stderr.write(`${error.message}\n`);
      process.exitCode = 1;
    });
}
