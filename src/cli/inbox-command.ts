import { Command } from 'commander';
import { clientConfig, createPool, qualified, withClient } from '../db';
import { createKafka } from '../kafka';
import { inboxPartitionNames, parkedTableName } from '../provision/sql-files';
import { consumerName } from '../router';
import { convertInbox } from '../router/inbox-convert';
import { assertInboxShape, prunePartitionedInbox } from '../router/inbox-partitions';
import { checkInboxRetention, inboxRowsEstimate, pruneInbox } from '../router/inbox-retention';
import { OutboxError } from '../errors';
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
  { flag: '--inbox-partition-interval-ms', path: 'router.inboxPartitionIntervalMs', parse: wholeNumber(0) },
  { flag: '--lock-timeout-ms', path: 'router.inboxPartitionLockTimeoutMs', parse: wholeNumber(10) },
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
    .option('--inbox-partition-interval-ms <ms>', `a partitioned inbox (docs/inbox-partitions.md): drop whole partitions past the window, DELETE only the catch-all's rows ${defaultOf('router.inboxPartitionIntervalMs')}`)
    .option('--lock-timeout-ms <ms>', `a partition drop gives up after waiting this long for its locks ${defaultOf('router.inboxPartitionLockTimeoutMs')}`)
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
        const parked = qualified(schema, parkedTableName(inboxTable));
        const partitionRun = async (signal: AbortSignal) => {
          const result = await prunePartitionedInbox(pool, {
            inboxTable: inbox,
            parkedTable: parked,
            fns: inboxPartitionNames({ schema, inboxTable }),
            consumer,
            retentionMs,
            intervalMs: settings.inboxPartitionIntervalMs,
            ahead: settings.inboxPartitionsAhead,
            lockTimeoutMs: settings.inboxPartitionLockTimeoutMs,
            batchSize: settings.inboxPruneBatchSize,
            signal,
          });
          const drop = result.drop;
          const report = {
            consumer,
            inboxTable: inbox,
            retentionMs,
            partitionsAdded: result.added,
            partitionsDropped: drop?.dropped ?? 0,
            partitionRows: drop?.rows ?? 0,
            partitionsKept: drop?.kept ?? {},
            dropMs: Math.round(drop?.ms ?? 0),
            lockWaitMs: Math.round((drop?.lockWaitMs ?? 0) * 10) / 10,
            lockHeldMs: Math.round((drop?.heldMs ?? 0) * 10) / 10,
            dropLockMs: Math.round((drop?.dropMs ?? 0) * 10) / 10,
            deleted: result.delete?.deleted ?? 0,
            batches: result.delete?.batches ?? 0,
            rowsEstimate: await inboxRowsEstimate(pool, inbox),
          };
          const kept = Object.entries(report.partitionsKept).filter(([why]) => why !== 'too-new').map(([why, n]) => `${n} ${why}`);
          process.stdout.write(
            opts.json
              ? `${JSON.stringify(report)}\n`
              : `inbox:prune: dropped ${report.partitionsDropped} partition(s) of ${inbox} past ${retentionMs} ms (${report.partitionRows} row(s)) in ${formatMs(report.dropMs)}, ` +
                  `longest lock wait ${report.lockWaitMs} ms, partition held ${report.lockHeldMs} ms, inbox held ${report.dropLockMs} ms${kept.length ? `; kept: ${kept.join(', ')}` : ''}; ` +
                  `added ${report.partitionsAdded.length}; deleted ${report.deleted} row(s) of consumer ${consumer} from the catch-all and kept partitions in ${report.batches} statement(s); about ${report.rowsEstimate} row(s) left\n`,
          );
        };
        try {
          await assertInboxShape(pool, inbox, settings.inboxPartitionIntervalMs);
          const partitioned = settings.inboxPartitionIntervalMs > 0;
          await runOnceOrEvery(
            async (signal) => {
              if (partitioned) return void (await partitionRun(signal));
              const result = await pruneInbox(pool, { inboxTable: inbox, parkedTable: parked, consumer, retentionMs, batchSize: settings.inboxPruneBatchSize, signal });
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

/** `outbox inbox:partition`: converts a one-table inbox into the partitioned one, online (docs/inbox-partitions.md). */
export function inboxPartitionCommand(): Command {
  return withConfigOption(
    new Command('inbox:partition').description(
      'Convert the inbox into a partitioned one, online: the table becomes the catch-all partition (no row moves, every applied event stays deduped), UUIDv7 ids from a cutover on go to time partitions of router.inboxPartitionIntervalMs, which the router adds ahead and drops whole past router.inboxRetentionMs. ' +
        'Needs migration 016 (outbox db:provision) and the owner of the inbox (the provisioning credentials). Every router must run this release before the cutover; an older one is refused then (a CHECK violation), never silently wrong. Idempotent (docs/inbox-partitions.md).',
    ),
  )
    .option('--inbox-partition-interval-ms <ms>', `the width of the time partitions ${defaultOf('router.inboxPartitionIntervalMs')}; required (one day: 86400000)`)
    .option('--cutover <time>', 'ISO time from which UUIDv7 ids go to time partitions; in the future (default: the start of the interval after the next)')
    .option('--lock-timeout-ms <ms>', 'the final swap waits at most this long for its lock per attempt (5 attempts)', '2000')
    .option('--json', 'print the report as JSON', false)
    .action(
      action(async (opts: { cutover?: string; lockTimeoutMs: string; json: boolean }, command: Command) => {
        const { config } = loadCommandConfig(command, INBOX_PRUNE_FLAGS);
        const intervalMs = config.router.inboxPartitionIntervalMs;
        if (intervalMs === 0) {
          throw new OutboxError('CONFIG_INVALID', 'inbox:partition needs the partition width: pass --inbox-partition-interval-ms (one day: 86400000) and set the same router.inboxPartitionIntervalMs for the routers.');
        }
        const cutoverMs = opts.cutover === undefined ? undefined : Date.parse(opts.cutover);
        if (cutoverMs !== undefined && Number.isNaN(cutoverMs)) throw new OutboxError('CONFIG_INVALID', `--cutover ${JSON.stringify(opts.cutover)} is not a time: give an ISO time such as 2026-12-08T00:00:00Z.`);
        const lockTimeoutMs = Number(opts.lockTimeoutMs);
        if (!Number.isInteger(lockTimeoutMs) || lockTimeoutMs < 10) throw new OutboxError('CONFIG_INVALID', `--lock-timeout-ms ${opts.lockTimeoutMs}: give a whole number of ms, at least 10.`);
        await withClient(clientConfig(config.database, { application_name: 'outbox-inbox-partition' }), async (client) => {
          const progress = (step: string, ms: number) => !opts.json && process.stdout.write(`inbox:partition: ${step} ${formatMs(ms)}\n`);
          const report = await convertInbox(client, { schema: config.outbox.schema, inboxTable: config.outbox.inboxTable, routerRole: config.roles.router, intervalMs, ahead: config.router.inboxPartitionsAhead, cutoverMs, lockTimeoutMs, progress });
          process.stdout.write(
            opts.json
              ? `${JSON.stringify(report)}\n`
              : report.converted
                ? `inbox:partition: converted; UUIDv7 ids from ${new Date(report.cutoverMs).toISOString()} on go to time partitions (added: ${report.partitions.join(', ')})\n`
                : `inbox:partition: already partitioned (cutover ${new Date(report.cutoverMs).toISOString()}): nothing to do\n`,
          );
        });
      }),
    );
}
