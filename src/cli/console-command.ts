import { Command } from 'commander';
import { createConsole } from '../console';
import { runService, type RunnableService } from '../service';
import { defaultOf, loadCommandConfig, wholeNumber, withConfigOption, type FlagSetting } from './config-option';
import { action, loggerFor } from './run-command';

/** The console's flags and the settings they set (console.*). */
export const CONSOLE_FLAGS: readonly FlagSetting[] = [
  { flag: '--port', path: 'console.port', parse: wholeNumber(0, 'a TCP port from 0 (any free port) to 65535') },
  { flag: '--host', path: 'console.host' },
  { flag: '--read-only', path: 'console.readOnly' },
  { flag: '--audit-log', path: 'console.auditLog' },
  { flag: '--sample-interval', path: 'console.sampleIntervalMs', parse: wholeNumber(1_000) },
];

export function consoleCommand(): Command {
  return withConfigOption(
    new Command('console').description(
      'The operator console: a web page and a JSON admin API over the pipeline (connector and tasks, the slot and its invalidation ETA, ' +
        'the outbox backlog, consumer lag per partition, the watchdog\'s alerts, charts of the last hour), the dead letters decoded and ' +
        'filtered, and the parked keys; replays, releases and connector restart/pause/resume behind a confirmation, through the same code ' +
        'as the CLI commands, each written to an audit log. Actions need OUTBOX_CONSOLE_TOKEN or OUTBOX_CONSOLE_USERNAME/PASSWORD; ' +
        'without them the console is read-only. /livez, /readyz, /healthz and /metrics on the same port. See docs/console.md.',
    ),
  )
    .option('--port <port>', `port of the page, the API and the probes, 0 for any free port ${defaultOf('console.port')}`)
    .option('--host <host>', `address to listen on; another than loopback needs credentials ${defaultOf('console.host')}`)
    .option('--read-only', `no actions: the page shows none and the API refuses them ${defaultOf('console.readOnly', 'off')}`)
    .option('--audit-log <file>', `the audit log, one JSON line per action ${defaultOf('console.auditLog')}`)
    .option('--sample-interval <ms>', `how often the pipeline is sampled for the overview and the charts ${defaultOf('console.sampleIntervalMs')}`)
    .action(
      action(async (_flags: unknown, command: Command) => {
        const log = loggerFor(command);
        const { config } = loadCommandConfig(command, CONSOLE_FLAGS);
        const consoleService = createConsole({ config, logger: log });
        const service: RunnableService = { start: () => consoleService.start(), stop: () => consoleService.stop(), status: () => consoleService.status(), ready: () => consoleService.ready() };
        await runService({
          service,
          logger: log,
          metrics: { host: config.console.host, port: config.console.port, registry: consoleService.registry, fallback: consoleService.handle },
          health: () => ({ healthy: consoleService.ready(), details: { ...consoleService.status(), readOnly: consoleService.readOnly } }),
          started: (url) => ({ fields: { console: url.replace(/\/metrics$/, '/'), readOnly: consoleService.readOnly, auditLog: consoleService.readOnly ? null : config.console.auditLog }, message: 'console started' }),
          stopping: 'console stopping',
          stopped: () => ({ fields: {}, message: 'console stopped' }),
        });
      }),
    );
}
