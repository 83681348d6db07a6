/**
 * The watchdog's outbox cleanup under CDC (watchdog.outboxCleanup): runOutboxCleanup every intervalMs
 * on a connection of its own, so a slow DELETE never delays a slot poll. Only while the watchdog watches
 * the connector (watchConnector): the slot it checks against is connector.slotName.
 */
import type { Pool } from 'pg';
import { describeRefusal, runOutboxCleanup, type OutboxCleanupRun } from '../cleanup';
import type { OutboxConfig } from '../config';
import { createPool, pgCode } from '../db';
import { isOutboxError } from '../errors';
import type { Logger } from '../log';
import { repeatUntilAborted } from '../service';
import type { WatchdogMetrics } from './metrics';

export interface CleanupLoopState {
  lastRun: OutboxCleanupRun | null;
  lastError: string | null;
}

export interface CleanupLoop {
  readonly state: CleanupLoopState;
  /** Runs until the signal aborts (resolves then). */
  run(signal: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

/** Whether this config's watchdog cleans the outbox: on by default, for the connector's slot only. */
export function cleansOutbox(config: OutboxConfig): boolean {
  return config.watchdog.watchConnector && config.watchdog.outboxCleanup.enabled;
}

export function createCleanupLoop(options: { config: OutboxConfig; database: OutboxConfig['database']; log?: Logger; metrics: WatchdogMetrics }): CleanupLoop {
  const { config, log, metrics } = options;
  const settings = config.watchdog.outboxCleanup;
  let pool: Pool | undefined;
  const state: CleanupLoopState = { lastRun: null, lastError: null };
  const connection = () =>
    (pool ??= createPool(
      options.database,
      { max: 1, application_name: 'outbox-watchdog-cleanup', statement_timeout: Math.max(config.watchdog.statementTimeoutMs, 30_000), idleTimeoutMillis: 0 },
      (error) => log?.warn({ err: { message: error.message, code: pgCode(error) } }, 'outbox cleanup connection lost while idle; reconnecting on the next run'),
    ));

  const once = async (signal: AbortSignal) => {
    const run = await runOutboxCleanup(connection(), {
      outbox: config.outbox,
      slotName: config.connector.slotName,
      batchSize: settings.batchSize,
      maxBatches: settings.maxBatches,
      signal,
    });
    state.lastRun = run;
    state.lastError = null;
    metrics.recordCleanup(run);
    const refusal = describeRefusal(run);
    if (refusal) log?.warn({ slot: run.slotName, refused: run.refused }, `outbox cleanup: ${refusal}`);
    else if (!run.slotFound) log?.warn({ slot: run.slotName }, 'outbox cleanup: the connector slot does not exist here, so nothing was deleted');
    else if (run.partitions) log?.[run.partitions.dropped + run.partitions.created > 0 ? 'info' : 'debug']({ ...run }, `outbox cleanup: ${run.partitions.dropped} partition(s) the slot has confirmed dropped, ${run.partitions.created} made ahead`);
    else log?.[run.deleted > 0 ? 'info' : 'debug']({ ...run }, `outbox cleanup: ${run.deleted} row(s) the slot has confirmed deleted`);
  };

  return {
    state,
    run: (signal) =>
      repeatUntilAborted(() => once(signal), {
        signal,
        intervalMs: settings.intervalMs,
        fromStart: true,
        onError: (error) => {
          state.lastError = error instanceof Error ? error.message : String(error);
          metrics.recordCleanup(null);
          log?.[isOutboxError(error) ? 'error' : 'warn']({ err: { message: state.lastError, code: pgCode(error) } }, 'outbox cleanup failed; next run in watchdog.outboxCleanup.intervalMs');
        },
      }),
    close: async () => {
      await pool?.end().catch(() => {});
    },
  };
}
