/**
 * Outbox cleanup under CDC: deletes, in small batches, only the rows the connector's replication slot
 * has provably read. The proof lives in one place, the SQL function of migration 011 (its comment has
 * the argument): this side only calls it once per batch, so each batch is its own short transaction,
 * and stops when a batch comes back short. The watchdog runs it on a timer; `outbox outbox:cleanup`
 * runs it once (for cron); `SELECT * FROM outbox_cleanup('<slot>', 5000)` works from pg_cron too.
 */
import type { Pool } from 'pg';
import { pgCode, runCleanup } from '../db';
import { OutboxError } from '../errors';
import { outboxCleanupFunctionName } from '../provision/sql-files';

export interface OutboxCleanupOptions {
  /** The outbox (schema, table) and the connector's slot. */
  outbox: { schema: string; table: string };
  slotName: string;
  /** Rows per DELETE (each its own transaction). */
  batchSize: number;
  /** DELETE statements per run at most, so one run under a steady stream ends. */
  maxBatches: number;
  signal?: AbortSignal;
}

export interface OutboxCleanupRun {
  slotName: string;
  /** false: no logical slot of that name in this database, so nothing was deleted. */
  slotFound: boolean;
  deleted: number;
  batches: number;
  confirmedFlushLsn: string | null;
  /** The newest mark the slot has confirmed: rows of transactions that ended before it may go. */
  safeLsn: string | null;
  safeTakenAt: string | null;
  /** The mark waiting for the slot to confirm it (taken by the first run that found none). */
  pendingLsn: string | null;
  durationMs: number;
}

interface BatchRow {
  deleted: number;
  slot_found: boolean;
  confirmed_flush_lsn: string | null;
  safe_lsn: string | null;
  safe_taken_at: Date | null;
  pending_lsn: string | null;
}

export async function runOutboxCleanup(pool: Pick<Pool, 'query'>, options: OutboxCleanupOptions): Promise<OutboxCleanupRun> {
  const started = performance.now();
  const fn = outboxCleanupFunctionName(options.outbox);
  let last: BatchRow | undefined;
  const deleteBatch = async (limit: number): Promise<number> => {
    try {
      const { rows } = await pool.query<BatchRow>(`SELECT * FROM ${fn}($1, $2)`, [options.slotName, limit]);
      last = rows[0];
    } catch (error) {
      throw cleanupError(error, fn);
    }
    return last?.slot_found ? last.deleted : 0;
  };
  const { deleted, batches } = await runCleanup(deleteBatch, { batchSize: options.batchSize, maxBatches: options.maxBatches, signal: options.signal });
  return {
    slotName: options.slotName,
    slotFound: last?.slot_found ?? false,
    deleted,
    batches,
    confirmedFlushLsn: last?.confirmed_flush_lsn ?? null,
    safeLsn: last?.safe_lsn ?? null,
    safeTakenAt: last?.safe_taken_at ? last.safe_taken_at.toISOString() : null,
    pendingLsn: last?.pending_lsn ?? null,
    durationMs: Math.round(performance.now() - started),
  };
}

/** A missing function or grant names db:provision; anything else passes through. */
function cleanupError(error: unknown, fn: string): unknown {
  const code = pgCode(error);
  if (code === '42883' || code === '42P01') {
    return new OutboxError('OUTBOX_CLEANUP_UNAVAILABLE', `The outbox cleanup function ${fn} does not exist: run \`outbox db:provision\` (migration 011 creates it).`, { cause: error });
  }
  if (code === '42501') {
    return new OutboxError('OUTBOX_CLEANUP_UNAVAILABLE', `The role may not run ${fn}: run \`outbox db:provision\`, which grants EXECUTE to roles.monitor (the watchdog's role), or connect as that role.`, { cause: error });
  }
  return error;
}
