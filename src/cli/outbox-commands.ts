import { Command } from 'commander';
import { describeRefusal, runBelowFloorCleanup, runOutboxCleanup, type BelowFloorRun, type OutboxCleanupRun } from '../cleanup';
import type { NamedOutbox, OutboxConfig } from '../config';
import { OutboxError } from '../errors';
import { switchToRelay } from '../connector';
import { watchdogDatabase } from '../watchdog';
import { createPool } from '../db';
import { defaultOf, loadCommandConfig, loadCommandOutboxes, wholeNumber, withConfigOption, type FlagSetting } from './config-option';
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
    .option(
      '--below-floor',
      "the one-off for rows the cleanup can never prove read (below the slot's floor: written before the slot, before migration 011, or before a re-created slot); " +
        'refused unless the registered slot streams (it has confirmed a mark); needs --dry-run (count them) or --yes (you vouch they were streamed or are not needed); as database.user',
      false,
    )
    .option('--dry-run', 'with --below-floor: count the rows, delete nothing', false)
    .option('--yes', 'with --below-floor: delete them', false)
    .action(
      action(async (opts: { once: boolean; json: boolean; belowFloor: boolean; dryRun: boolean; yes: boolean }, command: Command) => {
        const log = loggerFor(command);
        const outboxes = loadCommandOutboxes(command, OUTBOX_CLEANUP_FLAGS);
        if (opts.belowFloor) {
          if (outboxes.length > 1) throw new OutboxError('FLAG_INVALID', `outbox:cleanup --below-floor acts on one outbox: name it with --outbox (one of ${outboxes.map((o) => o.name).join(', ')}).`, { details: { flag: '--outbox' } });
          return belowFloor((outboxes[0] as NamedOutbox).config, opts);
        }
        if (opts.dryRun || opts.yes) throw new OutboxError('CONFIG_INVALID', 'outbox:cleanup: --dry-run and --yes belong to --below-floor; the regular cleanup deletes only what the slot confirmed and needs neither.');
        const cleanups = outboxes.map((outbox) => {
          const database = watchdogDatabase(outbox.config);
          return { outbox, database, pool: createPool(database, { max: 1, application_name: 'outbox-cleanup' }) };
        });
        // With several outboxes, one that failed its last run makes the exit code 1 (the others still ran).
        let failedLastRun = false;
        try {
          await runOnceOrEvery(
            async (signal) => {
              // Each outbox on its own connection, side by side: one that fails or hangs on a lock delays none of the others.
              const runs = await Promise.allSettled(cleanups.map(async ({ outbox, database, pool }) => {
                const { config } = outbox;
                const settings = config.watchdog.outboxCleanup;
                const report = await runOutboxCleanup(pool, { outbox: config.outbox, slotName: config.connector.slotName, batchSize: settings.batchSize, maxBatches: settings.maxBatches, signal });
                process.stdout.write(opts.json ? `${JSON.stringify(outbox.name ? { outbox: outbox.name, ...report } : report)}\n` : `outbox:cleanup${outbox.name ? ` [${outbox.name}]` : ''}: ${cleanupText(report, database.database)}\n`);
              }));
              const failed = runs.flatMap((run, i) => (run.status === 'rejected' ? [{ name: (cleanups[i] as { outbox: NamedOutbox }).outbox.name, error: run.reason as Error }] : []));
              if (failed.length === 1 && cleanups.length === 1) throw failed[0]?.error;
              for (const { name, error } of failed) log.warn({ event: 'outbox.cleanup-failed', outbox: name, error: error.message }, `outbox:cleanup of outbox ${name} failed; the others ran`);
              failedLastRun = failed.length > 0;
            },
            { once: opts.once, intervalMs: Math.min(...outboxes.map((o) => o.config.watchdog.outboxCleanup.intervalMs)), onError: (error) => log.warn({ event: 'outbox.cleanup-failed', error: (error as Error).message }, 'outbox:cleanup failed; trying again at the next interval') },
          );
        } finally {
          await Promise.all(cleanups.map(({ pool }) => pool.end().catch(() => {})));
        }
        return failedLastRun ? 1 : 0;
      }),
    );
}

function cleanupText(report: OutboxCleanupRun, database: string): string {
  const refusal = describeRefusal(report);
  return refusal
    ? `nothing deleted: ${refusal}`
    : !report.slotFound
      ? `no logical slot ${report.slotName} in ${database}: nothing deleted`
      : report.partitions
        ? `dropped ${report.partitions.dropped} partition(s) the slot ${report.slotName} confirmed, made ${report.partitions.created} ahead, ${report.partitions.kept} past partition(s) not yet provably read${report.partitions.lockTimeouts ? `, ${report.partitions.lockTimeouts} lock timeout(s) (next run)` : ''} (confirmed_flush_lsn ${report.confirmedFlushLsn}, newest confirmed mark ${report.safeLsn ?? 'none yet'}), ${formatMs(report.durationMs)}`
        : `deleted ${report.deleted} row(s) the slot ${report.slotName} confirmed (confirmed_flush_lsn ${report.confirmedFlushLsn}, newest confirmed mark ${report.safeLsn ?? 'none yet'}, pending mark ${report.pendingLsn ?? 'none'}) in ${report.batches} statement(s), ${formatMs(report.durationMs)}`;
}

const BELOW_FLOOR_REFUSALS: Record<NonNullable<BelowFloorRun['refused']>, string> = {
  unregistered: 'the slot is not registered for the cleanup (connector:deploy registers it; docs/operations.md)',
  'no-slot': 'the slot does not exist, so nothing shows that the connector streams',
  'no-confirmed-mark': 'the cleanup has not yet seen the slot confirm a mark (the connector is not streaming, or the cleanup has not run twice since the slot was registered or re-created): run `outbox outbox:cleanup --once` again once the connector streams',
};

/** `outbox:cleanup --below-floor`: after one regular run (which records what it sees of the slot), the guarded one-off, as the admin. */
async function belowFloor(config: OutboxConfig, opts: { json: boolean; dryRun: boolean; yes: boolean }): Promise<void> {
  if (opts.dryRun === opts.yes) {
    throw new OutboxError(
      'CONFIG_INVALID',
      'outbox:cleanup --below-floor deletes rows the cleanup cannot prove the connector read: add --dry-run to count them first, then --yes once you know they were streamed ' +
        '(the connector ran throughout) or are not needed (docs/operations.md, "Outbox cleanup under CDC").',
    );
  }
  const pool = createPool(config.database, { max: 1, application_name: 'outbox-cleanup' });
  try {
    const { batchSize } = config.watchdog.outboxCleanup;
    const regular = await runOutboxCleanup(pool, { outbox: config.outbox, slotName: config.connector.slotName, batchSize, maxBatches: config.watchdog.outboxCleanup.maxBatches });
    const report = await runBelowFloorCleanup(pool, { outbox: config.outbox, slotName: config.connector.slotName, batchSize, dryRun: opts.dryRun });
    if (opts.json) process.stdout.write(`${JSON.stringify({ ...report, regular })}\n`);
    else if (report.refused) process.stdout.write(`outbox:cleanup --below-floor: nothing ${opts.dryRun ? 'counted' : 'deleted'}: ${BELOW_FLOOR_REFUSALS[report.refused]}.\n`);
    else {
      process.stdout.write(
        `outbox:cleanup --below-floor${opts.dryRun ? ' (dry run)' : ''}: ${report.rows} row(s) below the floor of slot ${report.slotName} (tx_id NULL or below ${report.boundTxId}) ${opts.dryRun ? 'would be' : 'were'} deleted` +
          `${opts.dryRun ? '' : ` in ${report.batches} statement(s)`}; the regular run before it deleted ${regular.deleted}.\n`,
      );
    }
    if (report.refused) process.exitCode = 1;
  } finally {
    await pool.end().catch(() => {});
  }
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
        const { config } = loadCommandConfig(command, OUTBOX_CLEANUP_FLAGS.filter((f) => f.flag === '--slot'), 'outbox');
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
