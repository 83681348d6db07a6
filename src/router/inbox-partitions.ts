import { performance } from 'node:perf_hooks';
import type { Pool, PoolClient } from 'pg';
import { forgetInboxKeyFunction } from '../db';
import { OutboxError } from '../errors';
import { pruneInbox, type PruneResult } from './inbox-retention';

/**
 * The partitioned inbox (migration 016, docs/inbox-partitions.md): time partitions by range of
 * message_ms (the UUIDv7 timestamp of message_id, 0 for other ids and for ids before the conversion's
 * cutover), and one catch-all partition [MINVALUE, 1) for message_ms 0. The router adds partitions
 * ahead of time and drops a whole partition once its range ends before the window (now -
 * inboxRetentionMs), under the same retention check as the DELETE prune. The catch-all, and any time
 * partition that must stay (see the drop function's reasons), keep the DELETE prune.
 */

/** One partition of the inbox: [fromMs, toMs); fromMs null for the catch-all (MINVALUE). */
export interface InboxPartition {
  name: string;
  fromMs: number | null;
  toMs: number;
}

/** `FOR VALUES FROM ('1733443200000') TO ('1733529600000')` (pg_get_expr of relpartbound) → bounds; undefined when not a range bound. */
export function parsePartitionBound(expr: string): { fromMs: number | null; toMs: number } | undefined {
  const m = /^FOR VALUES FROM \((MINVALUE|'(-?\d+)')\) TO \('(-?\d+)'\)$/.exec(expr.trim());
  if (!m) return undefined;
  return { fromMs: m[2] === undefined ? null : Number(m[2]), toMs: Number(m[3]) };
}

/** The aligned partition [fromMs, toMs) of width `widthMs` that holds `ms` (aligned to the Unix epoch, UTC). */
export function partitionRange(ms: number, widthMs: number): { fromMs: number; toMs: number } {
  if (!Number.isSafeInteger(widthMs) || widthMs < 1) throw new RangeError(`partition width ${widthMs} ms: must be a whole number of ms, at least 1`);
  const fromMs = ms - (((ms % widthMs) + widthMs) % widthMs);
  return { fromMs, toMs: fromMs + widthMs };
}

/** The starts of the partitions to have ready: the one holding `nowMs` and `ahead` after it. */
export function partitionsToAdd(nowMs: number, widthMs: number, ahead: number): number[] {
  const { fromMs } = partitionRange(nowMs, widthMs);
  return Array.from({ length: ahead + 1 }, (_, i) => fromMs + i * widthMs);
}

/**
 * The time partitions that may be dropped: those whose whole range ends at or before `beforeMs` (now -
 * inboxRetentionMs), oldest first. Never the catch-all. The drop function checks the rest under lock.
 */
export function partitionsPastWindow(partitions: readonly InboxPartition[], beforeMs: number): InboxPartition[] {
  return partitions.filter((p) => p.fromMs !== null && p.toMs <= beforeMs).sort((a, b) => (a.fromMs as number) - (b.fromMs as number));
}

/**
 * The message_ms bound of the DELETE prune in a partitioned inbox: it touches only rows below the end of
 * the newest partition past the window (the catch-all, and partitions kept past it), never a partition
 * still inside the window, whose rows go all at once when it is dropped. 1 (the catch-all only) when
 * none is past the window.
 */
export function deleteBoundMs(partitions: readonly InboxPartition[], beforeMs: number): number {
  return Math.max(1, ...partitionsPastWindow(partitions, beforeMs).map((p) => p.toMs));
}

/** The inbox's partitions, or null when it is one table (not partitioned). */
export async function listInboxPartitions(pool: Pick<Pool, 'query'>, inboxTable: string): Promise<InboxPartition[] | null> {
  const { rows } = await pool.query<{ kind: string | null; name: string | null; bound: string | null }>(
    'SELECT c.relkind::text AS kind, p.relname AS name, pg_get_expr(p.relpartbound, p.oid) AS bound FROM pg_class c ' +
      'LEFT JOIN pg_inherits i ON i.inhparent = c.oid LEFT JOIN pg_class p ON p.oid = i.inhrelid WHERE c.oid = to_regclass($1)',
    [inboxTable],
  );
  if (rows[0]?.kind !== 'p') return null;
  return rows.flatMap((r) => {
    const bound = r.name && r.bound ? parsePartitionBound(r.bound) : undefined;
    return bound && r.name ? [{ name: r.name, ...bound }] : [];
  });
}

/** The SQL functions of migration 016, escaped and schema-qualified (src/provision/sql-files.ts inboxPartitionNames). */
export interface PartitionFunctions {
  add: string;
  drop: string;
}

/** Adds the missing partitions from now to `ahead` intervals on; returns the names added. */
export async function addPartitionsAhead(pool: Pick<Pool, 'query'>, fns: PartitionFunctions, nowMs: number, widthMs: number, ahead: number): Promise<string[]> {
  const added: string[] = [];
  for (const start of partitionsToAdd(nowMs, widthMs, ahead)) {
    const { rows } = await pool.query<{ name: string | null }>(`SELECT ${fns.add}($1::bigint, $2::bigint) AS name`, [start, widthMs]);
    if (rows[0]?.name) added.push(rows[0].name);
  }
  return added;
}

export const DROP_OUTCOMES = ['dropped', 'too-new', 'other-consumers', 'processed-late', 'parked', 'lock-timeout', 'not-found'] as const;
export type DropOutcome = (typeof DROP_OUTCOMES)[number];

export interface PartitionDropResult {
  /** Partitions dropped, and their rows (counted just before each drop). */
  dropped: number;
  rows: number;
  /** Partitions past the window that stay, by reason. */
  kept: KeptCounts;
  /**
   * Wall time of the whole run; the longest lock wait; the longest time a partition was locked (checks,
   * count, DROP: only inserts into that partition wait); the longest DROP (the parent's lock: every insert waits).
   */
  ms: number;
  lockWaitMs: number;
  heldMs: number;
  dropMs: number;
  names: string[];
}
type KeptCounts = Partial<Record<DropOutcome, number>>;

export interface DropOptions {
  inboxTable: string;
  consumer: string;
  retentionMs: number;
  lockTimeoutMs: number;
  /** Checked before each partition: true stops the run (the retention check failed meanwhile). */
  blocked?: () => boolean;
  signal?: AbortSignal;
  now?: () => number;
}

/** Drops the consumer's time partitions past the window, oldest first, each in its own short transaction. */
export async function dropInboxPartitions(pool: Pick<Pool, 'query'>, fns: PartitionFunctions, partitions: readonly InboxPartition[], options: DropOptions): Promise<PartitionDropResult> {
  const started = performance.now();
  const beforeMs = (options.now ?? Date.now)() - options.retentionMs;
  const result: PartitionDropResult = { dropped: 0, rows: 0, kept: {}, ms: 0, lockWaitMs: 0, heldMs: 0, dropMs: 0, names: [] };
  for (const p of partitionsPastWindow(partitions, beforeMs)) {
    if (options.signal?.aborted || options.blocked?.()) break;
    const { rows } = await pool.query<{ outcome: DropOutcome; rows_dropped: string; lock_wait_ms: number; held_ms: number; drop_ms: number }>(`SELECT * FROM ${fns.drop}($1, $2, $3::timestamptz, $4)`, [
      p.name,
      options.consumer,
      new Date(beforeMs).toISOString(),
      options.lockTimeoutMs,
    ]);
    const row = rows[0];
    if (!row) continue;
    result.lockWaitMs = Math.max(result.lockWaitMs, row.lock_wait_ms);
    result.heldMs = Math.max(result.heldMs, row.held_ms);
    result.dropMs = Math.max(result.dropMs, row.drop_ms);
    if (row.outcome === 'dropped') {
      result.dropped += 1;
      result.rows += Number(row.rows_dropped);
      result.names.push(p.name);
    } else result.kept[row.outcome] = (result.kept[row.outcome] ?? 0) + 1;
  }
  result.ms = performance.now() - started;
  return result;
}

export interface PartitionedPruneOptions {
  inboxTable: string;
  parkedTable: string;
  fns: PartitionFunctions;
  consumer: string;
  /** 0: never prune (partitions are still added). */
  retentionMs: number;
  intervalMs: number;
  ahead: number;
  lockTimeoutMs: number;
  batchSize: number;
  /** The retention check: true while pruning is unsafe (partitions are still added, nothing dropped or deleted). */
  blocked?: () => boolean;
  signal?: AbortSignal;
  now?: () => number;
}

export interface PartitionedPruneResult {
  added: string[];
  /** Undefined when nothing was to be pruned (retention 0, or the check blocked it). */
  drop?: PartitionDropResult;
  delete?: PruneResult;
}

/**
 * One run on a partitioned inbox: add the partitions ahead; then, while the retention check allows it,
 * drop the consumer's partitions past the window and DELETE (in batches, as before) only the rows below
 * the newest of them: the catch-all's and those of partitions kept past the window.
 */
export async function prunePartitionedInbox(pool: Pool, options: PartitionedPruneOptions): Promise<PartitionedPruneResult> {
  const now = options.now ?? Date.now;
  const before = await listInboxPartitions(pool, options.inboxTable);
  if (before === null) throw notPartitioned(options.inboxTable);
  const added = await addPartitionsAhead(pool, options.fns, now(), options.intervalMs, options.ahead);
  if (options.retentionMs === 0 || options.blocked?.()) return { added };
  const drop = await dropInboxPartitions(pool, options.fns, before, { ...options, now });
  const after = (await listInboxPartitions(pool, options.inboxTable)) ?? [];
  const keyBelowMs = deleteBoundMs(after, now() - options.retentionMs);
  const deleted = await pruneInbox(pool, { ...options, keyBelowMs });
  return { added, drop, delete: deleted };
}

export function notPartitioned(inboxTable: string): OutboxError {
  return new OutboxError(
    'INBOX_NOT_PARTITIONED',
    `router.inboxPartitionIntervalMs is set, but the inbox ${inboxTable} is one table, not partitioned. ` +
      'Run `outbox inbox:partition` to convert it online (docs/inbox-partitions.md), or set router.inboxPartitionIntervalMs to 0 to keep pruning it by DELETE.',
    { details: { inboxTable } },
  );
}

/** The partitioned inbox's shape must match the setting: refuses a partitioned inbox when the setting is 0 (nothing would add its partitions). */
export async function assertInboxShape(pool: Pick<Pool, 'query'>, inboxTable: string, intervalMs: number): Promise<void> {
  const partitions = await listInboxPartitions(pool, inboxTable);
  if (intervalMs > 0 && partitions === null) throw notPartitioned(inboxTable);
  if (intervalMs === 0 && partitions !== null) {
    throw new OutboxError(
      'INBOX_NOT_PARTITIONED',
      `The inbox ${inboxTable} is partitioned, but router.inboxPartitionIntervalMs is 0: nothing would add its time partitions or drop the old ones. ` +
        'Set router.inboxPartitionIntervalMs (--inbox-partition-interval-ms) to the width of its partitions (one day: 86400000).',
      { details: { inboxTable } },
    );
  }
}

/**
 * A check violation of the INSERT: the key function may be new (forget it, ask again next time), or no
 * partition holds an event's time (older than the oldest kept, newer than the newest made): add it, so
 * the retry the caller makes (InboxUnavailable) finds one. Never throws.
 */
export async function missingPartition(pool: Pool, client: PoolClient, inboxTable: string, ids: readonly string[], keyFn: string | null, error: Error): Promise<void> {
  forgetInboxKeyFunction(pool, inboxTable);
  if (!keyFn || !/no partition of relation/.test(error.message)) return;
  await client.query('ROLLBACK').catch(() => {});
  const add = keyFn.replace(/_message_ms("?)$/, '_partition_add$1');
  await client.query(`SELECT ${add}(ms) FROM (SELECT DISTINCT ${keyFn}(id) AS ms FROM unnest($1::text[]) AS t(id)) k`, [ids]).catch(() => {});
}
