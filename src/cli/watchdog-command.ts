import { Command, Option } from 'commander';
import { loadConfig, type OutboxConfig } from '../config';
import { isOutboxError } from '../errors';
import { startHealthServer } from '../router';
import { STACK_HOST, STACK_PORTS } from '../config/local-stack';
import { EXIT_CODES, createConnectorSupervisor, createWatchdog, renderOnce, watchdogHealthBody } from '../watchdog';
import { withConfigOption } from './config-option';
import { action, loggerFor } from './run-command';

interface WatchdogFlags {
  once?: boolean;
  interval?: number;
  metricsPort: number;
  metricsHost: string;
  json?: boolean;
  config?: string;
  restartFailedConnector?: boolean;
}

const int = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a whole number, got "${value}"`);
  return n;
};

/** The config, with `--interval` applied through the schema so it is validated like the env var. */
function watchdogConfig(command: Command, flags: WatchdogFlags): OutboxConfig {
  const { config } = command.optsWithGlobals<{ config?: string }>();
  return loadConfig({ file: config, overrides: flags.interval === undefined ? {} : { watchdog: { intervalMs: flags.interval } } });
}

export function watchdogCommand(): Command {
  return withConfigOption(
    new Command('watchdog').description(
      'Watch the replication slots: poll pg_replication_slots (a role with pg_monitor is enough), judge retained WAL, inactive and ' +
        'stalled consumers, invalidation and disk-full projections, and alert via webhook (Standard Webhooks signed), Slack and ' +
        'Alertmanager; /metrics and /healthz on --metrics-port. With --once: one check, a table, and exit 0 OK, 1 WARNING, ' +
        '2 CRITICAL, 3 UNKNOWN (for cron / monitoring plugins). See docs/watchdog.md.',
    ),
  )
    .option('--once', 'check once, print a table, exit 0/1/2/3 (OK/WARNING/CRITICAL/UNKNOWN); sends nothing')
    .addOption(new Option('--interval <ms>', 'poll interval in ms (default: watchdog.intervalMs, 15000)').argParser(int('--interval')))
    .addOption(new Option('--metrics-port <port>', '/metrics and /healthz port (0: any free port)').default(STACK_PORTS.watchdogMetrics).argParser(int('--metrics-port')))
    .option('--metrics-host <host>', 'address for /metrics and /healthz', STACK_HOST)
    .option('--json', 'with --once: print the slots and alerts as JSON instead of a table')
    .option('--restart-failed-connector', 'also watch the connector (connector.name) and restart FAILED tasks, with backoff (5 s doubling to 10 min); each restart is logged as watchdog.connector-restart and counted in outbox_watchdog_connector_restarts_total')
    .action(
      action(async (flags: WatchdogFlags, command: Command) => {
        if (flags.once) return runOnce(command, flags);
        const log = loggerFor(command);
        const config = watchdogConfig(command, flags);
        const watchdog = createWatchdog({ config, logger: log });
        const http = await startHealthServer({
          host: flags.metricsHost,
          port: flags.metricsPort,
          registry: watchdog.metrics.registry,
          health: () => watchdogHealthBody(watchdog),
        });
        const supervisor = flags.restartFailedConnector
          ? createConnectorSupervisor({ config, logger: log, intervalMs: Math.min(config.watchdog.intervalMs, 10_000), onRestart: () => watchdog.metrics.connectorRestarts.inc({ connector: config.connector.name }) })
          : undefined;
        watchdog.start();
        supervisor?.start();
        log.info({ cluster: watchdog.cluster, intervalMs: config.watchdog.intervalMs, metrics: `http://${flags.metricsHost}:${http.port}/metrics` }, 'watchdog started');
        await new Promise<void>((resolveStop) => {
          const stop = (signal: string) => {
            log.info({ signal }, 'watchdog stopping: delivering queued notifications (up to 5 s)');
            void Promise.resolve(supervisor?.stop())
              .then(() => watchdog.stop(5_000))
              .then(() => http.close())
              .finally(() => {
                log.info({ pending: watchdog.deliverer.pending() }, 'watchdog stopped');
                resolveStop();
              });
          };
          process.once('SIGTERM', () => stop('SIGTERM'));
          process.once('SIGINT', () => stop('SIGINT'));
        });
      }),
    );
}

/** `--once`: every failure, a bad setting included, is UNKNOWN (3), as monitoring plugins expect. */
async function runOnce(command: Command, flags: WatchdogFlags): Promise<number> {
  let config: OutboxConfig;
  try {
    config = watchdogConfig(command, flags);
  } catch (error) {
    process.stdout.write(`SLOT WATCHDOG UNKNOWN — ${isOutboxError(error) ? error.message : String(error)}\n`);
    return EXIT_CODES.UNKNOWN;
  }
  const watchdog = createWatchdog({ config, instant: true, deliver: false });
  try {
    const result = await watchdog.pollOnce();
    const statuses = watchdog.statuses().filter((s) => s.rule !== 'WatchdogDatabaseUnreachable');
    const watched = config.watchdog.slots;
    const sample = result.sample && watched.length > 0 ? { ...result.sample, slots: result.sample.slots.filter((s) => watched.includes(s.slotName)) } : result.sample;
    if (flags.json) {
      process.stdout.write(`${JSON.stringify({ cluster: watchdog.cluster, ok: result.ok, error: result.error?.message, slots: sample?.slots ?? [], alerts: statuses }, null, 2)}\n`);
    } else {
      process.stdout.write(renderOnce(watchdog.cluster, sample, statuses, result.error?.message));
    }
    if (!result.ok) return EXIT_CODES.UNKNOWN;
    const worst = statuses.some((s) => s.level === 'critical') ? EXIT_CODES.CRITICAL : statuses.some((s) => s.level === 'warning') ? EXIT_CODES.WARNING : EXIT_CODES.OK;
    return worst;
  } finally {
    await watchdog.stop(0);
  }
}
