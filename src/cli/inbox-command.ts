import { Command } from 'commander';
import { createPool, qualified } from '../db';
import { createKafka } from '../kafka';
import { parkedTableName } from '../provision/sql-files';
import { consumerName } from '../router';
import { checkInboxRetention, inboxRowsEstimate, pruneInbox } from '../router/inbox-retention';
import { topicNames } from '../topics';
import { defaultOf, loadCommandConfig, wholeNumber, withConfigOption, type FlagSetting } from './config-option';
import { topicsPattern } from './router-command';
import { action, formatMs, loggerFor, runOnceOrEvery } from './run-command';

/** inbox:prune's flags and the router settings they set (the same settings the router prunes with). */
export const INBOX_PRUNE_FLAGS: readonly FlagSetting[] = [
  { flag: '--consumer', path: 'router.consumer' },
  { flag: '--topics', path: 'router.topics', parse: (source: string) => (topicsPattern(source), source) },
  { flag: '--inbox-retention-ms', path: 'router.inboxRetentionMs', parse: wholeNumber(1) },
  { flag: '--dlq-replay-horizon-ms', path: 'router.dlqReplayHorizonMs', parse: wholeNumber(0) },
  { flag: '--allow-short-inbox-retention', path: 'router.allowShortInboxRetention' },
  { flag: '--batch-size', path: 'router.inboxPruneBatchSize', parse: wholeNumber(1) },
  { flag: '--interval-ms', path: 'router.inboxPruneIntervalMs', parse: wholeNumber(1_000) },
];

/** `outbox inbox:prune`: the router's inbox prune as a command, for cron (--once) or as its own process. */
export function inboxPruneCommand(): Command {
  return withConfigOption(
    new Command('inbox:prune').description(
      "Delete one consumer's inbox rows older than router.inboxRetentionMs, in short batches, keeping the rows of events still parked. " +
        "Refused when the window is below the safe minimum: the routed topics' retention.ms + segment.ms plus the DLQ replay horizon; a compacted topic, one kept forever or one whose settings cannot be read has none (docs/operations.md). " +
        'The router does the same on its own every router.inboxPruneIntervalMs; this command is for cron (--once) or a separate process.',
    ),
  )
    .option('--consumer <name>', 'the consumer whose rows are pruned (router.consumer; default on the local stack only: outbox-router)')
    .option('--topics <regex>', "the consumer's routed topics, whose retention is checked (router.topics; default: every routed topic of connector.topicReplacement)")
    .option('--inbox-retention-ms <ms>', `rows older than this are deleted ${defaultOf('router.inboxRetentionMs')}`)
    .option('--dlq-replay-horizon-ms <ms>', `part of the safe minimum ${defaultOf('router.dlqReplayHorizonMs')}`)
    .option('--allow-short-inbox-retention', 'prune even below the safe minimum, or with routed topics compacted or unreadable (a redelivery older than the window is applied twice)')
    .option('--batch-size <rows>', `rows per DELETE statement ${defaultOf('router.inboxPruneBatchSize')}`)
    .option('--interval-ms <ms>', `without --once, run again this long after each run ${defaultOf('router.inboxPruneIntervalMs')}`)
    .option('--once', 'one run, then exit (for cron)', false)
    .option('--json', 'print each run as a JSON line', false)
    .action(
      action(async (opts: { once: boolean; json: boolean }, command: Command) => {
        const log = loggerFor(command);
        const { config } = loadCommandConfig(command, INBOX_PRUNE_FLAGS);
        const settings = config.router;
        const consumer = consumerName(config, settings.consumer);
        const retentionMs = settings.inboxRetentionMs;
        if (retentionMs === 0) {
          process.stdout.write('inbox:prune: router.inboxRetentionMs is 0 (never prune): nothing to do\n');
          return;
        }
        // Refused where the router stops pruning (src/router/prune-guard.ts), with the routed topics as they
        // are now: every one unless router.topics names the consumer's (it has no handlers to name them).
        const names = topicNames(config.connector.topicReplacement);
        const routed = settings.topics === undefined ? names.pattern : topicsPattern(settings.topics);
        const admin = createKafka(config, { role: 'inbox-prune', logger: log }).admin();
        await admin.connect();
        try {
          const topics = (await admin.listTopics()).filter((t) => routed.test(t) && !names.dlqPattern.test(t)).sort();
          await checkInboxRetention(admin, topics, settings);
        } finally {
          await admin.disconnect().catch(() => {});
        }
        const { schema, inboxTable } = config.outbox;
        const inbox = qualified(schema, inboxTable);
        const pool = createPool(config.database, { max: 1, application_name: 'outbox-inbox-prune' });
        try {
          await runOnceOrEvery(
            async (signal) => {
              const result = await pruneInbox(pool, { inboxTable: inbox, parkedTable: qualified(schema, parkedTableName(inboxTable)), consumer, retentionMs, batchSize: settings.inboxPruneBatchSize, signal });
              const rows = await inboxRowsEstimate(pool, inbox);
              const report = { consumer, inboxTable: inbox, retentionMs, deleted: result.deleted, batches: result.batches, ms: Math.round(result.ms), rowsEstimate: rows };
              process.stdout.write(
                opts.json
                  ? `${JSON.stringify(report)}\n`
                  : `inbox:prune: deleted ${result.deleted} row(s) of consumer ${consumer} older than ${retentionMs} ms from ${inbox} in ${result.batches} statement(s), ${formatMs(report.ms)}; about ${rows} row(s) left\n`,
              );
            },
            { once: opts.once, intervalMs: settings.inboxPruneIntervalMs, onError: (error) => log.warn({ event: 'inbox.prune-failed', error: (error as Error).message }, 'inbox:prune failed; trying again at the next interval') },
          );
        } finally {
          await pool.end().catch(() => {});
        }
      }),
    );
}
