import { join } from 'node:path';
import { Command, Option } from 'commander';
import { formatBench } from './format';
import { runBench } from './run-bench';
import { PARTS, type Part } from './types';
import { PROJECT_ROOT } from '../stack/paths';
import { action, loggerFor } from 'outbox-router/cli';

const int = (v: string) => Number(v);
const list = (v: string) => v.split(',').map((x) => Number(x.trim()));

/** `--quick`: a profile a test can run in about two minutes; any flag given explicitly wins over it. */
export const QUICK = { seconds: 3, warmupSeconds: 3, rates: [100, 500], probes: 0, writerSeconds: 3, routerEvents: 3000, idleSeconds: 5, handlers: ['per-event'] } as const;

interface BenchFlags {
  only: string[];
  quick: boolean;
  seconds: number;
  warmupSeconds: number;
  rates: number[];
  probes: number;
  writerMode: 'sql' | 'writer';
  writerConnections: number;
  handlers: Array<'per-event' | 'batch'>;
  idleSeconds: number;
  writerSeconds: number;
  concurrency: number;
  routerEvents: number;
  exactlyOnce: boolean;
  output: string;
}

/** The flags after --quick, or an error message naming the bad one. Pure. */
export function benchSettings(flags: BenchFlags, fromDefault: (key: string) => boolean): BenchFlags | string {
  const out: BenchFlags = { ...flags, rates: [...flags.rates] };
  if (flags.quick) for (const [k, v] of Object.entries(QUICK)) if (fromDefault(k)) (out as unknown as Record<string, unknown>)[k] = Array.isArray(v) ? [...v] : v;
  const forms = out.handlers.filter((h) => h !== 'per-event' && h !== 'batch');
  if (forms.length > 0 || out.handlers.length === 0) return `--handlers takes a comma list of per-event, batch; got ${forms.length ? forms.join(', ') : 'nothing'}`;
  const unknown = out.only.filter((p) => !(PARTS as readonly string[]).includes(p));
  if (unknown.length > 0 || out.only.length === 0) return `--only takes a comma list of ${PARTS.join(', ')}; got ${unknown.length ? unknown.join(', ') : 'nothing'}`;
  const numbers: Array<[string, number, number]> = [
    ['--seconds', out.seconds, 1],
    ['--warmup-seconds', out.warmupSeconds, 0],
    ['--probes', out.probes, 0],
    ['--idle-seconds', out.idleSeconds, 1],
    ['--writer-connections', out.writerConnections, 1],
    ['--writer-seconds', out.writerSeconds, 1],
    ['--concurrency', out.concurrency, 1],
    ['--router-events', out.routerEvents, 1],
    ...out.rates.map((r) => ['--rates', r, 1] as [string, number, number]),
  ];
  for (const [name, value, min] of numbers) {
    if (!Number.isInteger(value) || value < min) return `${name} must be a whole number ≥ ${min}, got ${String(value)}`;
  }
  return out;
}

export function benchCommand(): Command {
  return new Command('bench')
    .description(
      'Measure the pipeline on the local stack (started if needed), in throw-away databases and topics, as an operator runs it: ' +
        'a writer child process writing at fixed rates, `outbox router` and `outbox relay` each in its own process, this one only driving and measuring. ' +
        'Gives commit -> handled latency from the database clock at both ends, against rate (a curve up to the sustained maximum, bench/latency-vs-rate.svg), ' +
        'for CDC (Debezium) and the polling relay, with the broker-time split, event-loop delay of each Node process and CPU microseconds per event of each process; ' +
        'each with per-event and batch handlers, and the CPU of each pipeline at rest (the idle part); then writer overhead, raw Kafka, the router CLI drain with per-event and batch handlers against raw consumption, and the watchdog. ' +
        'Prints every figure beside its target and writes bench/results.json (with a `why` for each missed target). See docs/bench.md.',
    )
    .addOption(new Option('--only <parts>', `comma list of parts: ${PARTS.join(',')}`).default([...PARTS]).argParser((v) => v.split(',').map((x) => x.trim()).filter(Boolean)))
    .option('--quick', `a short profile (${Object.entries(QUICK).map(([k, v]) => `${k} ${Array.isArray(v) ? v.join(',') : String(v)}`).join(', ')}); explicit flags win`, false)
    .addOption(new Option('--seconds <n>', 'length of each rate step of the latency curve').default(15).argParser(int))
    .addOption(new Option('--warmup-seconds <n>', 'warm-up at the first rate before each pipeline is measured (JVM and Node JIT)').default(20).argParser(int))
    .addOption(new Option('--rates <list>', 'events/s of the latency curve, in order; measuring stops at the first rate past the knee').default([100, 200, 500, 1000, 2000, 5000]).argParser(list))
    .addOption(new Option('--probes <n>', 'extra rates tried beyond --rates to find the sustained maximum').default(2).argParser(int))
    .addOption(new Option('--writer-mode <mode>', 'how the writer child writes: plain SQL, or createOutboxWriter').choices(['sql', 'writer']).default('sql'))
    .addOption(new Option('--writer-connections <n>', "the writer child's connections (events in flight at most)").default(16).argParser(int))
    .addOption(
      new Option('--handlers <forms>', "the router handler forms of the pipelines' curves, each a curve of its own: per-event (one handler call per event, the form users write first), batch (one set-based INSERT per run of fresh events)")
        .default(['per-event', 'batch'])
        .argParser((v) => v.split(',').map((x) => x.trim()).filter(Boolean)),
    )
    .addOption(new Option('--idle-seconds <n>', 'the idle part: how long each pipeline is watched with no events').default(30).argParser(int))
    .addOption(new Option('--writer-seconds <n>', 'writer-overhead run length, all modes over 3 rounds').default(9).argParser(int))
    .addOption(new Option('--concurrency <n>', 'concurrent business transactions in the writer-overhead runs').default(8).argParser(int))
    .addOption(new Option('--router-events <n>', 'records pre-filled for the router drain against raw consume').default(20_000).argParser(int))
    .option(
      '--exactly-once',
      'deploy the CDC connector with connector.exactlyOnce (KIP-618: one Kafka transaction per Debezium poll); the Connect worker must run with ' +
        'exactly.once.source.support=enabled (OUTBOX_STACK_EXACTLY_ONCE=enabled at its start, or OUTBOX_CONNECT_URL to such a worker)',
      false,
    )
    .option('-o, --output <file>', 'where to write the JSON results (the chart goes beside it)', join(PROJECT_ROOT, 'bench', 'results.json'))
    .action(
      action(async (opts: BenchFlags, command: Command) => {
        const settings = benchSettings(opts, (key) => command.getOptionValueSource(key) === 'default');
        if (typeof settings === 'string') {
          process.stderr.write(`outbox bench: ${settings}\n`);
          return 2;
        }
        const { quick: _quick, ...rest } = settings;
        const results = await runBench({ ...rest, only: rest.only as Part[], tty: Boolean(process.stderr.isTTY), log: loggerFor(command) });
        process.stdout.write(`${formatBench(results)}\n\nresults: ${settings.output}${results.chart?.file ? `\nchart: ${results.chart.file}` : ''}\n`);
      }),
    );
}
