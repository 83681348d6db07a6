import { once } from 'node:events';
import { Command } from 'commander';
import { OutboxError } from '../errors';
import { DEFAULT_REPLAY_FOLLOW_MS, DEFAULT_REPLAY_TIMEOUT_MS, type ReplayedRecord, type StillParked, type StillParkedReason } from '../router';
import { configFrom, withConfigOption } from './config-option';
import { DEFAULT_RELEASE_SETTLE_MS, runDlqRelease, runDlqReplay, target, type DlqTarget } from './dlq-operations';
import { action, loggerFor } from './run-command';

export { target };

/** What the text report says of a key a replay left parked, and what to do. */
const STILL_PARKED_WHY: Record<StillParkedReason, (k: StillParked) => string> = {
  'failed-again': (k) => `its replayed event ${k.eventId ?? '?'} failed again (${k.errorCode ?? '?'}); fix the cause and replay again`,
  'new-failure': (k) => `a new event ${k.eventId ?? '?'} failed (${k.errorCode ?? '?'}) while the replay followed the key; fix it and replay again`,
  'not-replayable': (k) => `dead letter ${k.eventId ?? '?'} was kept without its value; skip it with dlq:release --key ${k.key} --id ${k.eventId ?? '<id>'}`,
  'follow-timeout': () => 'the router was still applying its replayed events when --follow-ms ran out; replay again, or raise --follow-ms',
};

/** stdout, waiting when its buffer is full: a replay of millions must not queue its lines in memory. */
async function write(text: string): Promise<void> {
  if (!process.stdout.write(text)) await once(process.stdout, 'drain');
}

function timeoutMs(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new OutboxError('FLAG_INVALID', `--timeout-ms must be a whole number of milliseconds ≥ 1, got ${JSON.stringify(value)}.`);
  return Number(value);
}

function settleMs(value: string): number {
  if (!/^\d+$/.test(value)) throw new OutboxError('FLAG_INVALID', `--settle-ms must be a whole number of milliseconds ≥ 0, got ${JSON.stringify(value)}.`);
  return Number(value);
}

function followMs(value: string): number {
  if (!/^\d+$/.test(value)) throw new OutboxError('FLAG_INVALID', `--follow-ms must be a whole number of milliseconds ≥ 0, got ${JSON.stringify(value)}.`);
  return Number(value);
}

export function dlqCommands(): Command[] {
  const replay = withConfigOption(
    new Command('dlq:replay').description(
      'Re-publish dead letters to their original topics (original key, value and headers; x-replayed-at added), in dead-letter order. By default ' +
        "only those still outstanding for the consumer (its parked keys); --all for every match. The router applies them through the inbox, so a replay can't apply an event twice.",
    ),
  )
    .option('--aggregate-type <type>', 'replays outbox.dlq.<type>')
    .option('--topic <topic>', 'the dead-letter topic to read (instead of --aggregate-type)')
    .option('--key <key>', 'only dead letters with this key (aggregate id)')
    .option('--id <id...>', 'only these event ids')
    .option('--consumer <name>', 'the router consumer whose parked keys say what is outstanding (default on the local stack only: outbox-router)')
    .option('--all', 'every matching dead letter written within router.dlqReplayHorizonMs, not only outstanding ones', false)
    .option('--beyond-horizon', 'with --all, also dead letters older than router.dlqReplayHorizonMs (an event applied by an earlier replay whose inbox row was pruned is applied again)', false)
    .option('--dry-run', 'list what would be replayed; publish nothing', false)
    .option('--timeout-ms <ms>', 'give up when reading the dead-letter topic makes no progress for this long', timeoutMs, DEFAULT_REPLAY_TIMEOUT_MS)
    .option(
      '--follow-ms <ms>',
      'outstanding mode: after the end, keep replaying the events of the replayed keys that the router parks meanwhile (they arrived while the replay ran), until each key is released, for at most this long (0: one pass)',
      followMs,
      DEFAULT_REPLAY_FOLLOW_MS,
    )
    .option('--unattributed', 'also dead letters without x-consumer (written by routers before it was recorded; they may be another consumer\'s); outstanding mode takes those whose id is parked for the consumer without it', false)
    .option('--json', 'print JSON lines: one {"type":"replayed",…} per dead letter as it is sent, then the {"type":"report",…} summary', false)
    .action(
      action(
        async (
          opts: DlqTarget & { key?: string; id?: string[]; consumer?: string; all: boolean; beyondHorizon: boolean; unattributed: boolean; dryRun: boolean; json: boolean; timeoutMs: number; followMs: number },
          command: Command,
        ) => {
          const log = loggerFor(command);
          const config = configFrom(command);
          // Each replayed record is written as it is sent (the report keeps only a sample), waiting for stdout to drain.
          const onReplayed = (r: ReplayedRecord) =>
            write(opts.json ? `${JSON.stringify({ type: 'replayed', ...r })}\n` : `  ${r.id ?? '(no id)'}  key=${r.key}  → ${r.originalTopic}  (${r.errorCode ?? '?'}, dlq ${r.dlqPartition}/${r.dlqOffset})\n`);
          const { dlqTopic, consumer, report } = await runDlqReplay(config, { ...opts, ids: opts.id }, { logger: log, onReplayed });
          if (opts.json) {
            await write(`${JSON.stringify({ type: 'report', ...report })}\n`);
          } else {
            const verb = report.dryRun ? 'would replay' : 'replayed';
            const left = [
              report.withoutOrigin ? `${report.withoutOrigin} without x-original-topic left alone` : '',
              report.otherConsumer ? `${report.otherConsumer} of other consumers left alone` : '',
              report.unattributed ? `${report.unattributed} without x-consumer left alone (--unattributed replays them)` : '',
              report.reduced ? `${report.reduced} reduced (no value: release them with dlq:release --id)` : '',
              report.beyondHorizon ? `${report.beyondHorizon} first dead-lettered before router.dlqReplayHorizonMs left alone (--beyond-horizon replays them)` : '',
            ].filter(Boolean);
            await write(`${dlqTopic}: scanned ${report.scanned} dead letters, ${verb} ${report.replayed} for consumer ${consumer}${left.map((l) => `, ${l}`).join('')}\n`);
            if (report.resent) await write(`  sent again: ${report.resent} (they reached the router before their key's earliest parked event)\n`);
            if (report.replayed === 0 && !opts.all) await write('  nothing outstanding for this consumer; --all replays every match\n');
            for (const k of report.stillParkedDetail) await write(`  still parked: ${k.key}: ${STILL_PARKED_WHY[k.reason](k)}; head ${k.head ?? '?'}, ${k.parkedRows} parked row(s)\n`);
          }
        },
      ),
    );

  const release = withConfigOption(
    new Command('dlq:release').description(
      "Give up on parked dead letters (they stay in the dead-letter topic) so the router applies the key's events again. --head or --id skips exactly one " +
        "event (one that a replay cannot fix, e.g. undecodable bytes) and the key's next parked event becomes its head, to be replayed; without them, the " +
        "whole key (or every key) is released and its other parked events are abandoned.",
    ),
  )
    .option('--aggregate-type <type>', 'the aggregate type (required)')
    .option('--key <key>', 'one key; without it, every parked key of the aggregate type')
    .option('--id <event-id>', 'only this parked event')
    .option('--head', "only the key's earliest parked event (needs --key)", false)
    .option('--consumer <name>', 'the router consumer (default on the local stack only: outbox-router)')
    .option('--settle-ms <ms>', 'after releasing whole keys, wait this long and say which were parked again (a running router can re-park a key; 0: no check)', settleMs, DEFAULT_RELEASE_SETTLE_MS)
    .action(
      action(async (opts: { aggregateType?: string; key?: string; id?: string; head: boolean; consumer?: string; settleMs: number }, command: Command) => {
        if (!opts.aggregateType) throw new OutboxError('FLAG_INVALID', 'dlq:release needs --aggregate-type <type>.');
        const config = configFrom(command);
        const { parkedAgain: again } = await runDlqRelease(config, opts, {
          onReleased: ({ consumer, released }) => {
            process.stdout.write(`released ${released.length} parked dead letter(s) of ${opts.aggregateType}${opts.key ? ` key ${opts.key}` : ''} for consumer ${consumer}\n`);
            for (const r of released) process.stdout.write(`  ${r.eventId}  key=${r.aggregateId}\n`);
          },
        });
        if (again) {
          for (const k of again) {
            process.stdout.write(
              `  parked again within ${opts.settleMs} ms: key=${k.aggregateId}  head ${k.head} (${k.errorCode}), ${k.rows} parked row(s): a running router had loaded the old head, or a new event failed; ` +
                `replay it (dlq:replay --aggregate-type ${opts.aggregateType} --key ${k.aggregateId}) or release it again\n`,
            );
          }
          if (again.length === 0) process.stdout.write(`  none of the released keys was parked again within ${opts.settleMs} ms\n`);
        }
      }),
    );
  return [replay, release];
}

