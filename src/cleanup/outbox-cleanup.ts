/**
 * Outbox cleanup under CDC: deletes, in small batches, only the rows the connector's replication slot
 * has provably read. The proof lives in one place, the SQL function of migrations 011 and 012 (their
 * comments have the argument): this side only calls it once per batch, so each batch is its own short transaction,
 * and stops when a batch comes back short. The watchdog runs it on a timer; `outbox outbox:cleanup`
 * runs it once (for cron); `SELECT * FROM outbox_cleanup('<slot>', 5000)` works from pg_cron too.
 */
import type { Pool } from 'pg';
import { pgCode, runCleanup } from '../db';
import { OutboxError } from '../errors';
import { runPartitionCleanup } from './partition-cleanup';
import { outboxCleanupBelowFloorFunctionName, outboxCleanupFunctionName, outboxCleanupRegistrations } from '../provision/sql-files';

/**
 * Why a run deleted nothing on principle (migration 012): the slot is not registered for the cleanup;
 * it looks re-created since the last run (its floor and marks were forgotten, a new floor recorded);
 * PostgreSQL 14+ has no statistics row for it (so it cannot be told from a re-created one).
 */
export type CleanupRefusal = 'unregistered' | 'recreated' | 'statistics-missing';

export interface OutboxCleanupOptions {
  /**
   * The outbox (schema, table) and the connector's slot. cleanupMode 'partition' (outbox.cleanupMode)
   * drops confirmed partitions instead of deleting rows (src/cleanup/partition-cleanup.ts).
   */
  outbox: { schema: string; table: string; cleanupMode?: 'delete' | 'partition'; partitionSeconds?: number; partitionsAhead?: number };
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
  /** Set when the run deleted nothing on principle (see CleanupRefusal); null otherwise. */
  refused: CleanupRefusal | null;
  durationMs: number;
  /** cleanupMode 'partition': partitions made ahead, dropped, left (not yet provably read), and calls that met a lock timeout. */
  partitions?: { created: number; dropped: number; kept: number; lockTimeouts: number };
}

interface BatchRow {
  deleted: number;
  slot_found: boolean;
  confirmed_flush_lsn: string | null;
  safe_lsn: string | null;
  safe_taken_at: Date | null;
  pending_lsn: string | null;
  refused: CleanupRefusal | null;
}

export async function runOutboxCleanup(pool: Pick<Pool, 'query'>, options: OutboxCleanupOptions): Promise<OutboxCleanupRun> {
  if (options.outbox.cleanupMode === 'partition') {
    const { schema, table, partitionSeconds = 3600, partitionsAhead = 24 } = options.outbox;
    return runPartitionCleanup(pool, { ...options, outbox: { schema, table, partitionSeconds, partitionsAhead } }, cleanupError);
  }
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
    refused: last?.refused ?? null,
    durationMs: Math.round(performance.now() - started),
  };
}

/** What a refused run means, for logs and the CLI. */
export function describeRefusal(run: Pick<OutboxCleanupRun, 'slotName' | 'refused'>): string | null {
  switch (run.refused) {
    case 'unregistered':
      return `slot ${run.slotName} is not registered for the outbox cleanup, so it proves nothing: \`outbox connector:deploy\` registers the connector's slot; for a connector deployed by other means see docs/operations.md ("Outbox cleanup under CDC")`;
    case 'recreated':
      return `slot ${run.slotName} looks re-created since the last run (a position moved back, or its statistics restarted): the cleanup forgot its floor and marks and starts again from a new floor; rows below it stay (\`outbox outbox:cleanup --below-floor\`)`;
    case 'statistics-missing':
      return `slot ${run.slotName} has no row in pg_stat_replication_slots, so the cleanup cannot tell it from a re-created slot; it deletes nothing until the statistics appear`;
    default:
      return null;
  }
}

/** Registers a slot as the cleanup's proof (migration 012). Idempotent. Needs INSERT on the registrations table (the admin). */
export async function registerCleanupSlot(db: Pick<Pool, 'query'>, outbox: { schema: string; table: string }, slotName: string, registeredBy: string): Promise<void> {
  const table = outboxCleanupRegistrations(outbox);
  try {
    await db.query(`INSERT INTO ${table} (slot_name, registered_by) VALUES ($1, $2) ON CONFLICT (slot_name) DO NOTHING`, [slotName, registeredBy]);
  } catch (error) {
    throw cleanupError(error, table);
  }
}

export interface BelowFloorOptions {
  outbox: { schema: string; table: string };
  slotName: string;
  batchSize: number;
  /** Count what would be deleted; delete nothing. */
  dryRun: boolean;
  signal?: AbortSignal;
}

export interface BelowFloorRun {
  slotName: string;
  dryRun: boolean;
  /** Rows deleted, or on a dry run the rows that would be. */
  rows: number;
  batches: number;
  floorTxId: string | null;
  /** Rows of transactions below this id (and tx_id NULL) are the ones below the floor. */
  boundTxId: string | null;
  refused: 'unregistered' | 'no-slot' | 'no-confirmed-mark' | null;
}

/**
 * The one-off for rows below a slot's floor (migration 012's below_floor function): rows the cleanup
 * can never prove read (written before the slot, or before migration 011, or before a re-created
 * slot's new floor). The function refuses unless the registered slot streams (the cleanup watches it
 * and it has confirmed a mark); the operator vouches for the rest (they were streamed, or are not needed).
 */
export async function runBelowFloorCleanup(pool: Pick<Pool, 'query'>, options: BelowFloorOptions): Promise<BelowFloorRun> {
  const fn = outboxCleanupBelowFloorFunctionName(options.outbox);
  type Row = { affected: string; floor_tx_id: string | null; bound_tx_id: string | null; refused: BelowFloorRun['refused'] };
  let last: Row | undefined;
  const call = async (limit: number): Promise<number> => {
    try {
      const { rows } = await pool.query<Row>(`SELECT * FROM ${fn}($1, $2, $3)`, [options.slotName, limit, options.dryRun]);
      last = rows[0];
    } catch (error) {
      throw cleanupError(error, fn);
    }
    return last && !last.refused ? Number(last.affected) : 0;
  };
  const { deleted, batches } = options.dryRun
    ? { deleted: await call(options.batchSize), batches: 0 }
    : await runCleanup(call, { batchSize: options.batchSize, maxBatches: Number.MAX_SAFE_INTEGER, signal: options.signal });
  return { slotName: options.slotName, dryRun: options.dryRun, rows: deleted, batches, floorTxId: last?.floor_tx_id ?? null, boundTxId: last?.bound_tx_id ?? null, refused: last?.refused ?? null };
}

/** A missing function or grant names db:provision; anything else passes through. */
function cleanupError(error: unknown, fn: string): unknown {
  const code = pgCode(error);
  if (code === '42883' || code === '42P01') {
    return new OutboxError('OUTBOX_CLEANUP_UNAVAILABLE', `The outbox cleanup's ${fn} does not exist: run \`outbox db:provision\` (migrations 011, 012 and 015 create it).`, { cause: error });
  }
  if (code === '42501') {
    return new OutboxError('OUTBOX_CLEANUP_UNAVAILABLE', `The role may not run ${fn}: run \`outbox db:provision\`, which grants EXECUTE to roles.monitor (the watchdog's role), or connect as that role.`, { cause: error });
  }
  return error;
}
