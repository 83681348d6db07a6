import { Command } from 'commander';
import type { NamedOutbox, OutboxConfig } from '../config';
import { isOutboxError } from '../errors';
import type { Logger } from '../log';
import { createLifecycle, runService, type RunnableService } from '../service';
import { runOutboxSet } from './outbox-set';
import { EXIT_CODES, createConnectorSupervisor, createWatchdog, renderOnce, watchdogHealthBody, type Watchdog } from '../watchdog';
import { defaultOf, loadCommandOutboxes, wholeNumber, withConfigOption, type FlagSetting } from './config-option';
import { runEachOutbox } from './each-outbox';
import { action, loggerFor } from './run-command';

interface WatchdogFlags {
  once?: boolean;
  json?: boolean;
}

/** The watchdog's flags and the settings they set (watchdog.*). */
export const WATCHDOG_FLAGS: readonly FlagSetting[] = [
  { flag: '--interval', path: 'watchdog.intervalMs', parse: wholeNumber(0) },
  { flag: '--metrics-port', path: 'watchdog.metricsPort', parse: wholeNumber(0, 'a TCP port from 0 (any free port) to 65535') },
  { flag: '--metrics-host', path: 'watchdog.metricsHost' },
  { flag: '--restart-failed-connector', path: 'watchdog.restartFailedConnector' },
];

/** The watchdog with its optional connector supervisor, as one service (the supervisor stops first). */
function watchdogService(config: OutboxConfig, log: Logger, watchdog: Watchdog): RunnableService {
  const supervisor = config.watchdog.restartFailedConnector
    ? createConnectorSupervisor({ config, logger: log, intervalMs: Math.min(config.watchdog.intervalMs, 10_000), onRestart: () => watchdog.metrics.connectorRestarts.inc({ connector: config.connector.name }) })
    : undefined;
  const lifecycle = createLifecycle('watchdog', {
    start: async () => {
      watchdog.start();
      supervisor?.start();
    },
    stop: async () => {
      await supervisor?.stop();
      await watchdog.stop(5_000);
    },
  });
  return { start: () => lifecycle.start(), stop: () => lifecycle.stop(), status: () => lifecycle.status(), ready: () => watchdog.ready() };
}

export function watchdogCommand(): Command {
  return withConfigOption(
    new Command('watchdog').description(
      'Watch the replication slots: poll pg_replication_slots (a role with pg_monitor is enough), judge retained WAL, inactive and ' +
        'stalled consumers, invalidation and disk-full projections, and alert via webhook (Standard Webhooks signed), Slack and ' +
        'Alertmanager; /metrics, /livez, /readyz and /healthz on --metrics-port. With --once: one check, a table, and exit 0 OK, 1 WARNING, ' +
        '2 CRITICAL, 3 UNKNOWN (for cron / monitoring plugins). See docs/watchdog.md.',
    ),
  )
    .option('--once', 'check once, print a table, exit 0/1/2/3 (OK/WARNING/CRITICAL/UNKNOWN); sends nothing')
    .option('--interval <ms>', `poll interval in ms ${defaultOf('watchdog.intervalMs')}`)
    .option('--metrics-port <port>', `/metrics, /livez, /readyz and /healthz port, 0 for any free port ${defaultOf('watchdog.metricsPort')}`)
    .option('--metrics-host <host>', `address for /metrics, /livez, /readyz and /healthz ${defaultOf('watchdog.metricsHost')}`)
    .option('--json', 'with --once: print the slots and alerts as JSON instead of a table')
    .option(
      '--restart-failed-connector',
      `also watch the connector (connector.name) and restart FAILED tasks, with backoff (5 s doubling to 10 min); each restart is logged as watchdog.connector-restart and counted in outbox_watchdog_connector_restarts_total ${defaultOf('watchdog.restartFailedConnector', 'off')}`,
    )
    .action(
      action(async (flags: WatchdogFlags, command: Command) => {
        if (flags.once) return runOnce(command, flags);
        const log = loggerFor(command);
        const outboxes = loadCommandOutboxes(command, WATCHDOG_FLAGS);
        if (outboxes.length === 1 && outboxes[0]?.name === '') return runOne((outboxes[0] as NamedOutbox).config, log);
        return runSet(outboxes, log);
      }),
    );
}

async function runOne(config: OutboxConfig, log: Logger): Promise<void> {
  const watchdog = createWatchdog({ config, logger: log });
  const { metricsHost, metricsPort, intervalMs } = config.watchdog;
  await runService({
    service: watchdogService(config, log, watchdog),
    logger: log,
    metrics: { host: metricsHost, port: metricsPort, registry: watchdog.metrics.registry },
    health: () => watchdogHealthBody(watchdog),
    started: (url) => ({ fields: { cluster: watchdog.cluster, intervalMs, metrics: url }, message: 'watchdog started' }),
    stopping: 'watchdog stopping: delivering queued notifications (up to 5 s)',
    stopped: () => ({ fields: { pending: watchdog.deliverer.pending() }, message: 'watchdog stopped' }),
  });
}

/**
 * One watchdog per outbox in this process (docs/multi-outbox.md): each polls its own database and
 * alerts on its own slot; one whose database cannot be reached alerts on that alone.
 */
function runSet(outboxes: readonly NamedOutbox[], log: Logger): Promise<void> {
  return runOutboxSet(outboxes, log, {
    what: 'watchdog',
    create: (config, memberLog) => {
      const watchdog = createWatchdog({ config, logger: memberLog });
      return { service: watchdogService(config, memberLog, watchdog), registry: watchdog.metrics.registry, health: () => watchdogHealthBody(watchdog), watchdog };
    },
    http: (config) => ({ host: config.watchdog.metricsHost, port: config.watchdog.metricsPort }),
    stopping: 'watchdog stopping: delivering queued notifications (up to 5 s)',
    stoppedFields: (member) => ({ pending: member.watchdog.deliverer.pending() }),
  });
}

interface OnceResult {
  code: number;
  text: string;
  json: unknown;
}

/** `--once`: every failure, a bad setting included, is UNKNOWN (3), as monitoring plugins expect. */
async function runOnce(command: Command, flags: WatchdogFlags): Promise<number> {
  let outboxes: NamedOutbox[];
  try {
    outboxes = loadCommandOutboxes(command, WATCHDOG_FLAGS);
  } catch (error) {
    process.stdout.write(`SLOT WATCHDOG UNKNOWN — ${isOutboxError(error) ? error.message : String(error)}\n`);
    return EXIT_CODES.UNKNOWN;
  }
  // Every outbox side by side; the exit code is the worst of them.
  return runEachOutbox(outboxes, loggerFor(command), (outbox) => checkOnce(outbox.config), {
    json: Boolean(flags.json),
    concurrent: true,
    lines: (r) => [r.text.trimEnd()],
    jsonOf: (r) => r.json,
    exitCode: (r) => r.code,
    failedCode: EXIT_CODES.UNKNOWN,
  });
}

async function checkOnce(config: OutboxConfig): Promise<OnceResult> {
  const watchdog = createWatchdog({ config, instant: true, deliver: false });
  try {
    const result = await watchdog.pollOnce();
    const statuses = watchdog.statuses().filter((s) => s.rule !== 'WatchdogDatabaseUnreachable');
    const watched = config.watchdog.slots;
    const sample = result.sample && watched.length > 0 ? { ...result.sample, slots: result.sample.slots.filter((s) => watched.includes(s.slotName)) } : result.sample;
    const json = { cluster: watchdog.cluster, ok: result.ok, error: result.error?.message, slots: sample?.slots ?? [], outbox: result.outbox ?? null, alerts: statuses };
    const text = renderOnce(watchdog.cluster, sample, statuses, result.error?.message, result.outbox);
    if (!result.ok) return { code: EXIT_CODES.UNKNOWN, text, json };
    const worst = statuses.some((s) => s.level === 'critical') ? EXIT_CODES.CRITICAL : statuses.some((s) => s.level === 'warning') ? EXIT_CODES.WARNING : EXIT_CODES.OK;
    return { code: worst, text, json };
  } finally {
    await watchdog.stop(0);
  }
}
