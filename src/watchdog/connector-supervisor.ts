import type { OutboxConfig } from '../config';
import { connectorStatus, restartConnector } from '../connector';
import type { Logger } from '../log';
import { backoffDelay, type BackoffSettings } from '../retry';
import { repeatUntilAborted } from '../service';

export interface ConnectorSupervisorOptions {
  config: OutboxConfig;
  logger: Logger;
  /** How often Connect is asked for the connector's status. */
  intervalMs?: number;
  /** Between restarts of a connector that keeps failing: first 5 s, doubling to 10 min. */
  backoff?: BackoffSettings;
  /** A connector RUNNING this long counts as healthy again: the backoff starts over. */
  healthyAfterMs?: number;
  onRestart?: (info: { connector: string; attempt: number; failed: string[]; trace?: string }) => void;
  now?: () => number;
}

export interface ConnectorSupervisor {
  start(): void;
  stop(): Promise<void>;
  /** One check (also what the loop runs): restarts FAILED instances when the backoff allows. */
  check(): Promise<'running' | 'restarted' | 'waiting' | 'absent' | 'unknown'>;
  stats(): { restarts: number; consecutiveFailures: number };
}

/**
 * Kafka Connect never restarts a FAILED task by itself, and Debezium fails its task on some errors
 * that pass once the cause does: the chaos run saw "Couldn't get timestamp utils from underlying
 * connection" after a PostgreSQL restart, which left CDC stopped (and WAL growing) until someone ran
 * `connector:restart`. The supervisor does that restart, with exponential backoff so a connector that
 * fails for good (a poison record) is not restarted in a tight loop, and reports each restart so it
 * alerts rather than hides. Opt-in: `watchdog.restartFailedConnector` / `--restart-failed-connector`.
 */
export function createConnectorSupervisor(options: ConnectorSupervisorOptions): ConnectorSupervisor {
  const { config, logger } = options;
  const now = options.now ?? Date.now;
  const backoff = options.backoff ?? { initialDelayMs: 5_000, maxDelayMs: 10 * 60_000 };
  const healthyAfterMs = options.healthyAfterMs ?? 10 * 60_000;
  let consecutive = 0;
  let restarts = 0;
  let notBefore = 0;
  let runningSince: number | undefined;
  let abort = new AbortController();
  let loop: Promise<void> | undefined;

  async function check(): Promise<'running' | 'restarted' | 'waiting' | 'absent' | 'unknown'> {
    let status;
    try {
      status = await connectorStatus(config);
    } catch (error) {
      logger.debug({ err: (error as Error).message }, 'supervisor: Connect status unavailable');
      return 'unknown';
    }
    if (!status.exists) return 'absent';
    const failed = [...(status.state === 'FAILED' ? ['connector'] : []), ...status.tasks.filter((t) => t.state === 'FAILED').map((t) => `task ${t.id}`)];
    if (failed.length === 0) {
      runningSince ??= now();
      if (consecutive > 0 && now() - runningSince >= healthyAfterMs) consecutive = 0;
      return 'running';
    }
    runningSince = undefined;
    if (now() < notBefore) return 'waiting';
    consecutive++;
    restarts++;
    const trace = (status.trace ?? status.tasks.find((t) => t.state === 'FAILED')?.trace ?? '').split('\n')[0];
    notBefore = now() + backoffDelay(consecutive, backoff, () => 0.5);
    logger.warn(
      { event: 'watchdog.connector-restart', connector: config.connector.name, failed, attempt: consecutive, nextAllowedInMs: notBefore - now(), trace },
      `connector ${config.connector.name}: ${failed.join(', ')} FAILED; restarting (attempt ${consecutive})`,
    );
    try {
      await restartConnector(config);
    } catch (error) {
      logger.warn({ err: (error as Error).message }, 'supervisor: restart request failed');
    }
    options.onRestart?.({ connector: config.connector.name, attempt: consecutive, failed, trace });
    return 'restarted';
  }

  return {
    check,
    start() {
      if (loop) return;
      abort = new AbortController();
      loop = repeatUntilAborted(async () => void (await check()), { signal: abort.signal, intervalMs: options.intervalMs ?? 5_000 });
    },
    async stop() {
      abort.abort();
      await loop;
      loop = undefined;
    },
    stats: () => ({ restarts, consecutiveFailures: consecutive }),
  };
}
