/**
 * What the long runs (the data-lifecycle run, the chaos run's soak profile) sample once a minute, and
 * their verdict: nothing may grow without bound. Shared so both judge growth the same way.
 */
import { readFileSync } from 'node:fs';
import type { Pool } from 'pg';

/** Resident memory of one process in MB (0 when it is gone). */
export function rssMb(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024);
  } catch {
    return 0;
  }
}

export interface TableSample {
  outboxRows: number;
  outboxBytes: number;
  inboxRows: number;
  inboxBytes: number;
  parkedRows: number;
  parkedBytes: number;
  /** WAL the slot has not confirmed (0 without the slot: the relay pipeline). */
  slotUnconfirmedBytes: number;
}

/** Rows and bytes of the outbox, inbox and parked tables (default names), and the slot's unconfirmed WAL: one query. */
export async function sampleTables(pool: Pool, slotName: string): Promise<TableSample> {
  const { rows } = await pool.query<{ outbox_rows: number; outbox_bytes: string; inbox_rows: number; inbox_bytes: string; parked_rows: number; parked_bytes: string; slot_bytes: string | null }>(
    `SELECT (SELECT count(*) FROM outbox)::int AS outbox_rows, pg_total_relation_size('outbox')::bigint AS outbox_bytes,
            (SELECT count(*) FROM inbox)::int AS inbox_rows, pg_total_relation_size('inbox')::bigint AS inbox_bytes,
            (SELECT count(*) FROM inbox_parked)::int AS parked_rows, pg_total_relation_size('inbox_parked')::bigint AS parked_bytes,
            (SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0) FROM pg_replication_slots WHERE slot_name = $1)::bigint AS slot_bytes`,
    [slotName],
  );
  const r = rows[0];
  if (!r) throw new Error('sampleTables: no row');
  return {
    outboxRows: r.outbox_rows,
    outboxBytes: Number(r.outbox_bytes),
    inboxRows: r.inbox_rows,
    inboxBytes: Number(r.inbox_bytes),
    parkedRows: r.parked_rows,
    parkedBytes: Number(r.parked_bytes),
    slotUnconfirmedBytes: Number(r.slot_bytes ?? 0),
  };
}

/** One line for a progress log. */
export function describeTables(s: TableSample): string {
  const kib = (b: number) => (b / 1024).toFixed(0);
  return `outbox ${s.outboxRows} rows/${kib(s.outboxBytes)} KiB, inbox ${s.inboxRows}/${kib(s.inboxBytes)} KiB, parked ${s.parkedRows}/${kib(s.parkedBytes)} KiB, slot unconfirmed ${kib(s.slotUnconfirmedBytes)} KiB`;
}

/** The slack each table measure gets on top of 25 %: small absolute noise never fails a run. */
export const TABLE_SLACK: ReadonlyArray<readonly [keyof TableSample, number]> = [
  ['outboxBytes', 256 * 1024],
  ['inboxBytes', 512 * 1024],
  ['parkedBytes', 128 * 1024],
  ['slotUnconfirmedBytes', 1024 * 1024],
];

/** RSS slack in MB. */
export const RSS_SLACK_MB = 20;

export interface GrowthVerdict {
  key: string;
  middle: number;
  last: number;
  flat: boolean;
}

const avg = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

/**
 * Flat: the last third's mean within 25 % (plus `slack`) of the middle third's. The first third is the
 * warm-up (tables fill up to their retention, the JIT and caches settle). Pure.
 */
export function growthVerdicts<S extends object>(samples: readonly S[], keys: ReadonlyArray<readonly [keyof S & string, number]>): GrowthVerdict[] {
  const third = Math.floor(samples.length / 3);
  const middle = samples.slice(third, 2 * third);
  const last = samples.slice(2 * third);
  return keys.map(([key, slack]) => {
    const a = avg(middle.map((s) => Number(s[key])));
    const b = avg(last.map((s) => Number(s[key])));
    return { key, middle: Math.round(a), last: Math.round(b), flat: b <= a * 1.25 + slack };
  });
}
