import type { Pool } from 'pg';
import { pgCode, qualified } from '../db';
import { inboxPartitionNames, parkedTableName } from '../provision/sql-files';
import { repeatUntilAborted } from '../service';
import { assertInboxShape, prunePartitionedInbox } from './inbox-partitions';
import { inboxRowsEstimate, pruneInbox } from './inbox-retention';
import type { PruneGuard } from './prune-guard';
import type { RouterRuntime } from './runtime';

export interface ParkedSummary {
  aggregateType: string;
  keys: number;
  events: number;
  /** Age of the consumer's longest-parked event of this type, in seconds. */
  oldestSeconds: number;
}

/**
 * The consumer's parked keys per aggregate type in one statement, for the gauges: an index range on
 * (consumer, …) of migration 009, read on a timer, never per batch.
 */
export const parkedSummarySql = (parked: string): string =>
  'SELECT aggregate_type, count(DISTINCT aggregate_id)::int AS keys, count(*)::int AS events, ' +
  `EXTRACT(EPOCH FROM now() - min(parked_at))::float8 AS oldest FROM ${parked} WHERE consumer = $1 GROUP BY aggregate_type`;

export async function readParkedSummary(pool: Pool, parkedTable: string, consumer: string): Promise<ParkedSummary[]> {
  const { rows } = await pool.query<{ aggregate_type: string; keys: number; events: number; oldest: number }>(parkedSummarySql(parkedTable), [consumer]);
  return rows.map((r) => ({ aggregateType: r.aggregate_type, keys: r.keys, events: r.events, oldestSeconds: Math.max(0, r.oldest) }));
}

/**
 * The router's timers beside consuming: the inbox prune and the parked-key gauges, each until `signal`
 * aborts. Each prune run checks the subscribed topics' retention first and prunes nothing while `guard`
 * finds it unsafe (and stops after its statement in hand when a new topic makes it so meanwhile).
 */
export function runHousekeeping(rt: RouterRuntime, pool: Pool, signal: AbortSignal, guard: PruneGuard): Promise<void>[] {
  const { settings } = rt;
  const { schema, inboxTable } = rt.options.config.outbox;
  const inbox = qualified(schema, inboxTable);
  const parked = qualified(schema, parkedTableName(inboxTable));
  const onError = (task: string) => (error: unknown) => rt.events.emit('router.housekeeping-failed', { task, code: pgCode(error), error: (error as Error).message });
  const tasks: Promise<void>[] = [];
  if (settings.inboxPartitionIntervalMs > 0) {
    // A partitioned inbox (migration 016): partitions are added ahead even while pruning is blocked or off.
    const fns = inboxPartitionNames({ schema, inboxTable });
    const run = async () => {
      const blocked = () => guard.blocked() !== undefined;
      if (settings.inboxRetentionMs > 0) await guard.check();
      const result = await prunePartitionedInbox(pool, {
        inboxTable: inbox,
        parkedTable: parked,
        fns,
        consumer: settings.consumer,
        retentionMs: settings.inboxRetentionMs,
        intervalMs: settings.inboxPartitionIntervalMs,
        ahead: settings.inboxPartitionsAhead,
        lockTimeoutMs: settings.inboxPartitionLockTimeoutMs,
        batchSize: settings.inboxPruneBatchSize,
        signal,
        blocked,
      });
      const { drop } = result;
      // Logged (info) when something happened: a partition added, dropped, or kept past the window.
      const kept = Object.keys(drop?.kept ?? {}).some((why) => why !== 'too-new');
      if (result.added.length > 0 || (drop?.dropped ?? 0) > 0 || kept) {
        rt.events.emit('router.inbox-partitions', {
          added: result.added,
          dropped: drop?.dropped ?? 0,
          droppedNames: drop?.names ?? [],
          rows: drop?.rows ?? 0,
          kept: drop?.kept ?? {},
          ms: Math.round(drop?.ms ?? 0),
          lockWaitMs: drop?.lockWaitMs ?? 0,
          heldMs: drop?.heldMs ?? 0,
          dropMs: drop?.dropMs ?? 0,
        });
      }
      if (result.delete) rt.events.emit('router.inbox-pruned', { ...result.delete, rows: await inboxRowsEstimate(pool, inbox) });
    };
    tasks.push(repeatUntilAborted(run, { signal, intervalMs: settings.inboxPruneIntervalMs, onError: onError('inbox-partitions') }));
  } else if (settings.inboxRetentionMs > 0) {
    const prune = async () => {
      // A partitioned inbox needs the setting (nothing else adds its partitions): said at every run.
      await assertInboxShape(pool, inbox, 0);
      if (await guard.check()) return;
      const blocked = () => guard.blocked() !== undefined;
      const result = await pruneInbox(pool, { inboxTable: inbox, parkedTable: parked, consumer: settings.consumer, retentionMs: settings.inboxRetentionMs, batchSize: settings.inboxPruneBatchSize, signal, blocked });
      rt.events.emit('router.inbox-pruned', { ...result, rows: await inboxRowsEstimate(pool, inbox) });
    };
    tasks.push(repeatUntilAborted(prune, { signal, intervalMs: settings.inboxPruneIntervalMs, onError: onError('inbox-prune') }));
  }
  if (settings.parkKeys && settings.parkedMetricsIntervalMs > 0) {
    const gauges = async () => rt.events.emit('router.parked', { types: await readParkedSummary(pool, parked, settings.consumer) });
    tasks.push(repeatUntilAborted(gauges, { signal, intervalMs: settings.parkedMetricsIntervalMs, onError: onError('parked-gauges') }));
  }
  return tasks;
}
