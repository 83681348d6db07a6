import type { Pool } from 'pg';
import { pgCode, runCleanup } from '../db';
import { repeatUntilAborted } from '../service';
import { messageOf, query, type RelayRuntime } from './runtime';

/** The age of the oldest unpublished row (the lag gauge). */
async function measureLag(rt: RelayRuntime): Promise<void> {
  const { rows } = await query<{ seconds: number }>(rt, rt.pool as Pool, rt.sql.lag);
  rt.stats.lagSeconds = Number(rows[0]?.seconds ?? 0);
  rt.events.emit('relay.lag', { seconds: rt.stats.lagSeconds, queries: 1 });
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
