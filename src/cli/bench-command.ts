import { join } from 'node:path';
import { Command, Option } from 'commander';
import { formatBench, PARTS, runBench, type Part } from '../bench/run-bench';
import { PROJECT_ROOT } from '../stack/paths';
import { action, loggerFor } from './run-command';

const positiveInt = (v: string) => Number(v);

export function benchCommand(): Command {
  return new Command('bench')
    .description(
      'Measure on the local stack (started if needed), in throw-away databases and topics, side by side: writer overhead, ' +
        'commit -> handled latency and sustained throughput through Debezium and through the polling relay (router in-process, Avro, inbox), ' +
        'raw Kafka produce -> consume, the router CLI against raw consumption, and the watchdog. Prints every figure beside its target ' +
        'and writes bench/results.json (with a `why` for each missed target). See docs/bench.md.',
    )
    .addOption(new Option('--only <parts>', `comma list of parts: ${PARTS.join(',')}`).default([...PARTS]).argParser((v) => v.split(',').map((x) => x.trim()).filter(Boolean)))
    .addOption(new Option('--seconds <n>', 'length of each fixed-rate run and writer mode (the sustained run is twice this)').default(8).argParser(positiveInt))
    .addOption(new Option('--sustained-seconds <n>', 'length of the sustained-throughput run (default 2 x --seconds; 0 skips it)').argParser(positiveInt))
    .addOption(new Option('--concurrency <n>', 'concurrent business transactions in the writer runs').default(8).argParser(positiveInt))
    .addOption(new Option('--rates <list>', 'events/s for the latency runs').default([500, 1000]).argParser((v) => v.split(',').map(Number)))
    .addOption(new Option('--writers <n>', 'concurrent writers in the sustained run').default(4).argParser(positiveInt))
    .addOption(new Option('--events-per-transaction <n>', 'events per writer transaction in the sustained run').default(10).argParser(positiveInt))
    .option('-o, --output <file>', 'where to write the JSON results', join(PROJECT_ROOT, 'bench', 'results.json'))
    .action(
      action(
        async (
          opts: { only: string[]; seconds: number; sustainedSeconds?: number; concurrency: number; rates: number[]; writers: number; eventsPerTransaction: number; output: string },
          command: Command,
        ) => {
          const unknown = opts.only.filter((p) => !(PARTS as readonly string[]).includes(p));
          if (unknown.length > 0 || opts.only.length === 0) {
            process.stderr.write(`outbox bench: --only takes a comma list of ${PARTS.join(', ')}; got ${unknown.length ? unknown.join(', ') : 'nothing'}\n`);
            return 2;
          }
          const numbers: Array<[string, number | undefined]> = [
            ['--seconds', opts.seconds],
            ['--sustained-seconds', opts.sustainedSeconds],
            ['--concurrency', opts.concurrency],
            ['--writers', opts.writers],
            ['--events-per-transaction', opts.eventsPerTransaction],
            ...opts.rates.map((r) => ['--rates', r] as [string, number]),
          ];
          for (const [name, value] of numbers) {
            // --sustained-seconds 0 skips the sustained run.
            if (value !== undefined && (!Number.isInteger(value) || value < (name === '--sustained-seconds' ? 0 : 1))) {
              process.stderr.write(`outbox bench: ${name} must be a positive integer, got ${String(value)}\n`);
              return 2;
            }
          }
          const results = await runBench({ ...opts, only: opts.only as Part[], tty: Boolean(process.stderr.isTTY), log: loggerFor(command) });
          process.stdout.write(`${formatBench(results)}\n\nresults: ${opts.output}\n`);
        },
      ),
    );
}
