import type { Pool } from 'pg';
import { pgCode, runCleanup } from '../db';
import { repeatUntilAborted } from '../service';
import { DEFAULT_BACKLOG_CAP, readPending } from '../watchdog/outbox-query';
import { messageOf, query, type RelayRuntime } from './runtime';

/**
 * The age of the oldest unpublished row (the lag gauge) and how many wait, counted up to
 * DEFAULT_BACKLOG_CAP (one statement, the outbox health query of src/watchdog/outbox-query.ts), and the
 * keys held back now. A backlog of 0 also ends a publish failure streak (publish-health.ts).
 */
async function measureLag(rt: RelayRuntime): Promise<void> {
  const { schema, table } = rt.config.outbox;
  rt.stats.queries++;
  const pending = await readPending(rt.pool as Pool, { schema, table, backlogCap: DEFAULT_BACKLOG_CAP });
  rt.stats.lagSeconds = pending.oldestPendingAgeSeconds ?? 0;
  rt.stats.backlog = pending.pendingRows ?? 0;
  rt.stats.backlogCapped = pending.pendingCapped;
  rt.stats.blockedKeys = rt.blocks.reduce((n, b) => n + (b?.active().length ?? 0), 0);
  rt.publishHealth.backlog(rt.stats.backlog);
  rt.events.emit('relay.lag', { seconds: rt.stats.lagSeconds, backlog: rt.stats.backlog, backlogCapped: rt.stats.backlogCapped, blockedKeys: rt.stats.blockedKeys, queries: 1 });
}

/** Deletes published rows past retention (runCleanup). */
async function cleanup(rt: RelayRuntime, signal: AbortSignal): Promise<void> {
  const result = await runCleanup(async (limit) => (await query(rt, rt.pool as Pool, rt.sql.cleanup, [rt.settings.retentionMs, limit])).rowCount ?? 0, { batchSize: rt.settings.cleanupBatchSize, signal });
  rt.stats.deleted += result.deleted;
  rt.events.emit('relay.cleanup', { deleted: result.deleted, queries: result.batches });
}

/** The lag measurement and the cleanup, each on its own interval until the signal aborts. */
export function runHousekeeping(rt: RelayRuntime, signal: AbortSignal): Promise<void>[] {
  const onError = (task: string) => (error: unknown) => rt.events.emit('relay.db-error', { task, code: pgCode(error), error: messageOf(error) });
  return [
    repeatUntilAborted(() => measureLag(rt), { signal, intervalMs: rt.settings.lagIntervalMs, onError: onError('lag') }),
    repeatUntilAborted(() => cleanup(rt, signal), { signal, intervalMs: rt.settings.cleanupIntervalMs, onError: onError('cleanup') }),
  ];
}
