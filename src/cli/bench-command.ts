import { join } from 'node:path';
import { Command, Option } from 'commander';
import { formatBench, runBench } from '../bench/run-bench';
import { PROJECT_ROOT } from '../stack/paths';
import { action, loggerFor } from './run-command';

export function benchCommand(): Command {
  return new Command('bench')
    .description(
      'Measure on the local stack (started if needed), in a throw-away database: business TPS with and without the outbox row, ' +
        'and commit -> Kafka latency through Debezium at fixed rates. Writes bench/results.json and prints a table.',
    )
    .addOption(new Option('--seconds <n>', 'length of each measurement').default(8).argParser((v) => Number.parseInt(v, 10)))
    .addOption(new Option('--concurrency <n>', 'concurrent business transactions in the writer runs').default(8).argParser((v) => Number.parseInt(v, 10)))
    .addOption(new Option('--rates <list>', 'events/s for the latency runs').default([500, 1000]).argParser((v) => v.split(',').map((x) => Number.parseInt(x, 10))))
    .option('-o, --output <file>', 'where to write the JSON results', join(PROJECT_ROOT, 'bench', 'results.json'))
    .action(
      action(async (opts: { seconds: number; concurrency: number; rates: number[]; output: string }, command: Command) => {
        for (const [name, value] of [['--seconds', opts.seconds], ['--concurrency', opts.concurrency], ...opts.rates.map((r) => ['--rates', r] as const)] as const) {
          if (!Number.isInteger(value) || (value as number) <= 0) {
            process.stderr.write(`outbox bench: ${name} must be a positive integer, got ${String(value)}\n`);
            return 2;
          }
        }
        const results = await runBench({ ...opts, log: loggerFor(command) });
        process.stdout.write(`${formatBench(results)}\n\nresults: ${opts.output}\n`);
      }),
    );
}
