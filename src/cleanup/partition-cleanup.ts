/**
 * The outbox cleanup with outbox.cleanupMode = 'partition': migration 015's function makes the
 * partitions ahead and drops, one per call (each its own short transaction), a partition every row of
 * which the connector's slot has provably read. The argument is in the migration's comment; this side
 * only calls it until a call drops nothing.
 */
import type { Pool } from 'pg';
import { runCleanup } from '../db';
import { outboxPartitionsFunctionName } from '../provision/sql-files';
import type { CleanupRefusal, OutboxCleanupRun } from './outbox-cleanup';

/** How long a call waits for the outbox's lock (running writers) before it leaves the work to the next run. */
export const PARTITION_LOCK_TIMEOUT_MS = 1_000;

export interface PartitionCleanupOptions {
  outbox: { schema: string; table: string; partitionSeconds: number; partitionsAhead: number };
  slotName: string;
  /** Calls (each drops at most one partition) per run at most. */
  maxBatches: number;
  lockTimeoutMs?: number;
  signal?: AbortSignal;
}

interface PartitionRow {
  created: number;
  dropped: number;
  kept: number;
  slot_found: boolean;
  confirmed_flush_lsn: string | null;
  safe_lsn: string | null;
  pending_lsn: string | null;
  refused: CleanupRefusal | null;
  lock_timeouts: number;
}

export async function runPartitionCleanup(
  pool: Pick<Pool, 'query'>,
  options: PartitionCleanupOptions,
  onError: (error: unknown, fn: string) => unknown,
): Promise<OutboxCleanupRun> {
  const started = performance.now();
  const fn = outboxPartitionsFunctionName(options.outbox);
  const totals = { created: 0, dropped: 0, kept: 0, lockTimeouts: 0 };
  let last: PartitionRow | undefined;
  const call = async (): Promise<number> => {
    try {
      const { rows } = await pool.query<PartitionRow>(`SELECT * FROM ${fn}($1, $2, $3, $4)`, [
        options.slotName,
        options.outbox.partitionSeconds,
        options.outbox.partitionsAhead,
        options.lockTimeoutMs ?? PARTITION_LOCK_TIMEOUT_MS,
      ]);
      last = rows[0];
    } catch (error) {
      throw onError(error, fn);
    }
    if (!last) return 0;
    totals.created += last.created;
    totals.dropped += last.dropped;
    totals.kept = last.kept;
    totals.lockTimeouts += last.lock_timeouts;
    return last.slot_found ? last.dropped : 0;
  };
  const { batches } = await runCleanup(call, { batchSize: 1, maxBatches: options.maxBatches, signal: options.signal });
  return {
    slotName: options.slotName,
    slotFound: last?.slot_found ?? false,
    deleted: 0,
    batches,
    confirmedFlushLsn: last?.confirmed_flush_lsn ?? null,
    safeLsn: last?.safe_lsn ?? null,
    safeTakenAt: null,
    pendingLsn: last?.pending_lsn ?? null,
    refused: last?.refused ?? null,
    durationMs: Math.round(performance.now() - started),
    partitions: totals,
  };
}
