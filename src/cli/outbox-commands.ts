import { Command } from 'commander';
import { runOutboxCleanup } from '../cleanup';
import { switchToRelay } from '../connector';
import { watchdogDatabase } from '../watchdog';
import { createPool } from '../db';
import { defaultOf, loadCommandConfig, wholeNumber, withConfigOption, type FlagSetting } from './config-option';
import { peekTimeoutOption } from './connector-commands';
import { action, formatMs, loggerFor, runOnceOrEvery } from './run-command';

/** outbox:cleanup's flags: the watchdog's cleanup settings (the same ones it runs with). */
export const OUTBOX_CLEANUP_FLAGS: readonly FlagSetting[] = [
  { flag: '--batch-size', path: 'watchdog.outboxCleanup.batchSize', parse: wholeNumber(1) },
  { flag: '--max-batches', path: 'watchdog.outboxCleanup.maxBatches', parse: wholeNumber(1) },
  { flag: '--interval-ms', path: 'watchdog.outboxCleanup.intervalMs', parse: wholeNumber(100) },
  { flag: '--slot', path: 'connector.slotName' },
];

/** `outbox outbox:cleanup`: the watchdog's CDC cleanup as a command, for cron (--once) or its own process. */
function cleanupCommand(): Command {
  return withConfigOption(
    new Command('outbox:cleanup').description(
      "Delete, in short batches, the outbox rows the connector's replication slot has confirmed (CDC). Rows the slot has not " +
        'confirmed are never deleted, whether the connector runs, is paused, failed or deleted; a missing slot deletes nothing. ' +
        'The watchdog does this every watchdog.outboxCleanup.intervalMs already; this command is for deployments without one, or cron. ' +
        'Runs as watchdog.user when set (EXECUTE on the cleanup function is all it needs), else database.user. See docs/operations.md.',
    ),
  )
    .option('--slot <name>', `the connector's slot ${defaultOf('connector.slotName')}`)
    .option('--batch-size <rows>', `rows per DELETE statement ${defaultOf('watchdog.outboxCleanup.batchSize')}`)
    .option('--max-batches <n>', `DELETE statements per run at most ${defaultOf('watchdog.outboxCleanup.maxBatches')}`)
    .option('--interval-ms <ms>', `without --once, run again this long after each run ${defaultOf('watchdog.outboxCleanup.intervalMs')}`)
    .option('--once', 'one run, then exit (for cron)', false)
    .option('--json', 'print each run as a JSON line', false)
    .action(
      action(async (opts: { once: boolean; json: boolean }, command: Command) => {
        const log = loggerFor(command);
        const { config } = loadCommandConfig(command, OUTBOX_CLEANUP_FLAGS);
        const settings = config.watchdog.outboxCleanup;
        const database = watchdogDatabase(config);
        const pool = createPool(database, { max: 1, application_name: 'outbox-cleanup' });
        try {
          await runOnceOrEvery(
            async (signal) => {
              const report = await runOutboxCleanup(pool, { outbox: config.outbox, slotName: config.connector.slotName, batchSize: settings.batchSize, maxBatches: settings.maxBatches, signal });
              const text = !report.slotFound
                ? `outbox:cleanup: no logical slot ${report.slotName} in ${database.database}: nothing deleted\n`
                : `outbox:cleanup: deleted ${report.deleted} row(s) the slot ${report.slotName} confirmed (confirmed_flush_lsn ${report.confirmedFlushLsn}, newest confirmed mark ${report.safeLsn ?? 'none yet'}, pending mark ${report.pendingLsn ?? 'none'}) in ${report.batches} statement(s), ${formatMs(report.durationMs)}\n`;
              process.stdout.write(opts.json ? `${JSON.stringify(report)}\n` : text);
            },
            { once: opts.once, intervalMs: settings.intervalMs, onError: (error) => log.warn({ event: 'outbox.cleanup-failed', error: (error as Error).message }, 'outbox:cleanup failed; trying again at the next interval') },
          );
        } finally {
          await pool.end().catch(() => {});
        }
      }),
    );
}

/** `outbox outbox:switch-to-relay`: hand a CDC outbox to the polling relay without publishing the CDC era again. */
function switchToRelayCommand(): Command {
  return withConfigOption(
    new Command('outbox:switch-to-relay').description(
      'Hand a CDC outbox to the polling relay: stop the connector (it stays STOPPED), then mark published every row it had published ' +
        '(the slot is peeked, not consumed), so the relay publishes only what CDC had not. Runs as the admin role (database.user; peeking ' +
        'a slot needs REPLICATION or superuser). Then start the relay, delete the connector and drop its slot. See docs/relay.md.',
    ),
  )
    .option('--slot <name>', `the connector's slot ${defaultOf('connector.slotName')}`)
    .option('--dry-run', 'count what would be marked; change nothing', false)
    .addOption(peekTimeoutOption())
    .option('--json', 'print the report as JSON', false)
    .action(
      action(async (opts: { dryRun: boolean; json: boolean; peekTimeoutMs: number }, command: Command) => {
        const { config } = loadCommandConfig(command, OUTBOX_CLEANUP_FLAGS.filter((f) => f.flag === '--slot'));
        const report = await switchToRelay(config, { dryRun: opts.dryRun, peekTimeoutMs: opts.peekTimeoutMs, log: loggerFor(command) });
        if (opts.json) process.stdout.write(`${JSON.stringify(report)}\n`);
        else {
          process.stdout.write(
            `outbox:switch-to-relay${report.dryRun ? ' (dry run)' : ''}: ${report.markedPublished} row(s) connector ${report.connector} had published ${report.dryRun ? 'would be' : 'are'} marked published; ` +
              `${report.leftForRelay} row(s) are left for the relay (${report.unpublishedTransactions} transaction(s) past its position ${report.position} on slot ${report.slotName}).\n`,
          );
          if (!report.dryRun) {
            process.stdout.write(
              `The connector is STOPPED. Next: start the relay (\`outbox relay\`); then \`outbox connector:delete --drop-slot --force\` (--force because the rows it counts as unpublished are the relay's now), and run the watchdog with watchdog.watchConnector=false.\n`,
            );
          }
        }
      }),
    );
}

export function outboxCommands(): Command[] {
  return [cleanupCommand(), switchToRelayCommand()];
}
