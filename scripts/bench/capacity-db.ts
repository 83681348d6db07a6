/**
 * The capacity bench's measuring tools (capacity.ts): WAL positions, table sizes, the chunked loader
 * with its progress lines, and the probe, a second connection that keeps writing while a prune or a
 * cleanup runs and records how long each of its statements waited.
 */
import { statfsSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { Pool } from 'pg';
import { chunks } from './capacity-sql';

export const say = (line: string): void => void process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);

export async function walLsn(pool: Pick<Pool, 'query'>): Promise<string> {
  return (await pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]!.lsn;
}

export async function walSince(pool: Pick<Pool, 'query'>, start: string): Promise<number> {
  return Number((await pool.query<{ b: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::text AS b', [start])).rows[0]!.b);
}

/** Runs `work` and returns its wall time (ms) and the WAL bytes written meanwhile (by anyone: the bench is alone on its cluster). */
export async function measured<T>(pool: Pick<Pool, 'query'>, work: () => Promise<T>): Promise<{ result: T; ms: number; walBytes: number }> {
  const start = await walLsn(pool);
  const t = performance.now();
  const result = await work();
  const ms = performance.now() - t;
  return { result, ms, walBytes: await walSince(pool, start) };
}

export interface TableSize {
  rows: number;
  heapBytes: number;
  indexBytes: number;
  totalBytes: number;
  partitions: number;
}

/** A table's size, a partitioned one's summed over its partitions; rows from the planner (after ANALYZE). */
export async function tableSize(pool: Pick<Pool, 'query'>, table: string): Promise<TableSize> {
  const { rows } = await pool.query<{ rows: string; heap: string; idx: string; total: string; parts: string }>(
    'SELECT sum(greatest(c.reltuples, 0))::bigint::text AS rows, sum(pg_relation_size(t.relid))::text AS heap, sum(pg_indexes_size(t.relid))::text AS idx, ' +
      // pg_partition_tree returns nothing for a table that is not partitioned: the table itself then.
      "sum(pg_total_relation_size(t.relid))::text AS total, (count(*) FILTER (WHERE t.relid <> $1::regclass))::text AS parts " +
      "FROM (SELECT relid FROM pg_partition_tree($1::regclass) UNION SELECT $1::regclass) t JOIN pg_class c ON c.oid = t.relid WHERE c.relkind = 'r'",
    [table],
  );
  const r = rows[0]!;
  return { rows: Number(r.rows ?? 0), heapBytes: Number(r.heap ?? 0), indexBytes: Number(r.idx ?? 0), totalBytes: Number(r.total ?? 0), partitions: Number(r.parts ?? 0) };
}

/** Free bytes on the cluster's disk (the data directory's file system). */
export async function diskFree(pool: Pick<Pool, 'query'>): Promise<number> {
  const dir = (await pool.query<{ d: string }>("SELECT current_setting('data_directory') AS d")).rows[0]!.d;
  const s = statfsSync(dir);
  return s.bavail * s.bsize;
}

export const gb = (bytes: number): string => `${(bytes / 1e9).toFixed(1)} GB`;
const secs = (ms: number) => (ms < 60_000 ? `${(ms / 1000).toFixed(0)} s` : `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`);

export interface LoadResult {
  rows: number;
  ms: number;
  rowsPerSecond: number;
  walBytes: number;
}

/**
 * Runs the chunk statements [0, rows) on `workers` connections, each chunk its own transaction, with a
 * progress line every `everyMs`; `afterChunk` runs after each (serialised: the slot advance).
 */
export async function load(
  pool: Pool,
  label: string,
  rows: number,
  chunkRows: number,
  workers: number,
  sql: (lo: number, hi: number) => string,
  afterChunk?: () => Promise<void>,
): Promise<LoadResult> {
  const queue = chunks(rows, chunkRows);
  const started = performance.now();
  const startLsn = await walLsn(pool);
  let done = 0;
  let lastLine = 0;
  let serial: Promise<void> = Promise.resolve();
  const worker = async () => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      const [lo, hi] = next;
      await pool.query(sql(lo, hi));
      done += hi - lo;
      if (afterChunk) await (serial = serial.then(afterChunk));
      const now = performance.now();
      if (now - lastLine >= 15_000 || done === rows) {
        lastLine = now;
        const rate = done / ((now - started) / 1000);
        say(`${label}: ${done.toLocaleString('en')} / ${rows.toLocaleString('en')} rows (${((done / rows) * 100).toFixed(1)} %), ${Math.round(rate).toLocaleString('en')} rows/s, ${secs(now - started)}, about ${secs(((rows - done) / rate) * 1000)} left`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, workers) }, worker));
  const ms = performance.now() - started;
  return { rows, ms, rowsPerSecond: rows / (ms / 1000), walBytes: await walSince(pool, startLsn) };
}

export interface ProbeResult {
  statements: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/**
 * A writer beside the measured work: `statement` (its own transaction) every `pauseMs` on its own
 * connection until stopped; what each took. The longest is the most a writer waited on the work's locks
 * (or its I/O): an ACCESS EXCLUSIVE lock held for 2 s shows as a probe of 2 s or more.
 */
export function startProbe(pool: Pool, statement: () => string, pauseMs = 10): { stop(): Promise<ProbeResult> } {
  const times: number[] = [];
  let running = true;
  const loop = (async () => {
    const client = await pool.connect();
    try {
      while (running) {
        const t = performance.now();
        await client.query(statement());
        times.push(performance.now() - t);
        await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
    } finally {
      client.release();
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      const sorted = [...times].sort((a, b) => a - b);
      const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
      return { statements: sorted.length, p50Ms: at(0.5), p99Ms: at(0.99), maxMs: sorted[sorted.length - 1] ?? 0 };
    },
  };
}

/** VACUUM (ANALYZE) of a table, timed and its WAL counted. */
export async function vacuum(pool: Pick<Pool, 'query'>, table: string): Promise<{ ms: number; walBytes: number }> {
  const m = await measured(pool, () => pool.query(`VACUUM (ANALYZE) ${table}`));
  return { ms: m.ms, walBytes: m.walBytes };
}
