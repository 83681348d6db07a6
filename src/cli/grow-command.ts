import { Command, Option } from 'commander';
import { growTopics } from '../connector';
import { OutboxError } from '../errors';
import { loadCommandConfig, withConfigOption } from './config-option';
import { action, formatMs, loggerFor } from './run-command';

const collect = (value: string, previous: string[]): string[] => [...previous, value];

/** `outbox topics:grow`: more partitions for routed topics without breaking per-key order (src/connector/grow.ts). */
export function topicsGrowCommand(): Command {
  return withConfigOption(
    new Command('topics:grow').description(
      'Add partitions to routed topics without breaking per-key order: stop the connector (STOPPED, so its producers start again seeing the new partitions; or, with --producer none, trust that the relay is stopped), ' +
        'wait until the topics stop growing and every --group has applied everything, add the partitions, resume. Refuses, resuming the connector, when a group cannot be confirmed.',
    ),
  )
    .requiredOption('--topic <topic>', 'a routed topic to grow (repeatable)', collect, [])
    .requiredOption('--partitions <n>', 'the new partition count', (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 2) throw new OutboxError('FLAG_INVALID', `--partitions must be a whole number above 1, got ${JSON.stringify(v)}.`);
      return n;
    })
    .option('--group <groupId>', 'a consumer group that reads these topics and must have applied everything first (repeatable; every router consumer of them)', collect, [])
    .addOption(new Option('--producer <kind>', 'connector: stop connector.name meanwhile, resume it after; none: every producer (the relay) is already stopped, and restarted after').choices(['connector', 'none']).default('connector'))
    .option('--timeout-ms <ms>', 'give up on a group after this long', (v) => Number(v), 300_000)
    .option('--json', 'print the report as JSON', false)
    .action(
      action(async (opts: { topic: string[]; partitions: number; group: string[]; producer: 'connector' | 'none'; timeoutMs: number; json: boolean }, command: Command) => {
        const log = loggerFor(command);
        const config = loadCommandConfig(command, [], 'outbox').config;
        const report = await growTopics(config, { topics: opts.topic, partitions: opts.partitions, groups: opts.group, producer: opts.producer, timeoutMs: opts.timeoutMs, logger: log });
        if (opts.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
        else log.info({ ms: report.ms }, `grew ${report.topics.map((t) => `${t.topic} ${t.from} → ${t.to}`).join(', ')} after ${report.groups.join(', ')} applied everything (${formatMs(report.ms)})`);
      }),
    );
}
