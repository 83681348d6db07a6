import { cpus } from 'node:os';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { Client } from 'pg';
import { createCodec, topicForReplacement } from '../codec';
import { loadConfig, type OutboxConfig } from '../config';
import { deleteConnector, deployConnector } from '../connector';
import { clientConfig } from '../db';
import { createKafka } from '../kafka';
import type { Logger } from '../log';
import { createLogger } from '../log';
import { createOutboxWriter } from '../producer';
import { createRelay } from '../relay';
import { createStack } from '../stack';
import { measureWatchdog, type WatchdogMeasurement } from '../watchdog/measure';
import { createBenchDatabase, type BenchDatabase } from './bench-db';
import { childPids, startLoad, stackMemoryMb, type Load, type LoadWindow } from './load';
import { measurePipeline, type PipelineRun } from './pipeline';
import { createProgress } from './progress';
import { measureRawKafka, type RawKafkaRun } from './raw-kafka';
import { measureRouterThroughput, type RouterThroughputRun } from './router-throughput';
import { round } from './stats';
import { buildVerdicts } from './verdicts';
import type { Verdict } from './targets';
import { measureWriter, type WriterRun } from './writer-overhead';

export { formatBench } from './format';

export const PARTS = ['writer', 'cdc', 'relay', 'raw', 'router', 'watchdog'] as const;
export type Part = (typeof PARTS)[number];

export interface BenchOptions {
  seconds: number;
  concurrency: number;
  rates: number[];
  only: Part[];
  output: string;
  log: Logger;
  /** Progress bars (a terminal) or one log line per second. */
  tty?: boolean;
  /** Sustained-throughput run length; default 2 × seconds. */
  sustainedSeconds?: number;
  /** Concurrent writers and events per transaction in the sustained run. */
  writers?: number;
  eventsPerTransaction?: number;
  /** Events pre-filled for the router vs raw consume comparison. */
  routerEvents?: number;
}

export interface WriterResults {
  concurrency: number;
  runs: WriterRun[];
  ratio: number;
  ratioSameStatement: number;
  ratioDeleteAfterInsert: number;
  target: number;
  load: Load;
}

export interface BenchResults {
  machine: { cpus: number; node: string; when: string };
  options: { seconds: number; rates: number[]; only: Part[]; concurrency: number; sustainedSeconds: number; writers: number; eventsPerTransaction: number; partitions: number };
  writer?: WriterResults;
  cdc?: PipelineRun;
  relay?: PipelineRun & { settings: { workers: number; batchSize: number; pollIntervalMs: number } };
  raw?: RawKafkaRun & { load: Load };
  router?: RouterThroughputRun & { load: Load };
  watchdog?: WatchdogMeasurement & { load: Load };
  /** PSS of the stack's processes at the end of the run. */
  stackMemory?: { totalMb: number; byGroup: Record<string, number> };
  /** Parts that failed, with the error: the rest of the run still reports. */
  errors: Partial<Record<Part, string>>;
  verdicts: Verdict[];
  /** Every target missed, with what the measurement shows about why. */
  missed: Array<{ id: string; what: string; value: number; target: string; why: string }>;
  durationSeconds: number;
}

const PARTITIONS = 4;

/**
 * One run on the local stack, every part side by side (or the `only` subset): writer overhead, the CDC
 * and relay pipelines end to end (fixed rates and sustained), raw Kafka, the router CLI against raw
 * consumption, and the watchdog. Each part gets throw-away databases and topics named after the run,
 * all removed at the end, also when a part fails.
 */
export async function runBench(options: BenchOptions): Promise<BenchResults> {
  const { log } = options;
  const started = Date.now();
  const only = new Set(options.only);
  const progress = createProgress({ tty: options.tty ?? false, log });
  const sustainedSeconds = options.sustainedSeconds ?? options.seconds * 2;
  const writers = options.writers ?? 4;
  const eventsPerTransaction = options.eventsPerTransaction ?? 10;
  const runId = Date.now().toString(36);
  const cleanups: Array<{ what: string; run: () => Promise<unknown> }> = [];
  /** Set by SIGINT/SIGTERM: no further part starts. */
  let interrupted = false;
  const results: BenchResults = {
    machine: { cpus: cpus().length, node: process.version, when: new Date().toISOString() },
    options: { seconds: options.seconds, rates: options.rates, only: [...only], concurrency: options.concurrency, sustainedSeconds, writers, eventsPerTransaction, partitions: PARTITIONS },
    errors: {},
    verdicts: [],
    missed: [],
    durationSeconds: 0,
  };

  const step = createLogger({ name: 'bench', level: 'warn' });
  const base = loadConfig();
  await createStack().up((e) => log.debug({ step: e.step }, e.detail));
  let admin: Client | undefined;
  const database = async (suffix: string, overrides: Parameters<typeof createBenchDatabase>[0] = {}): Promise<BenchDatabase> => {
    const db = await createBenchDatabase(overrides, `${runId}_${suffix}`);
    cleanups.unshift({ what: `database ${db.config.database.database}`, run: once(() => db.drop()) });
    return db;
  };
  const part = async (name: Part, body: () => Promise<void>) => {
    if (!only.has(name) || interrupted) return;
    progress.note(`== ${name}`);
    try {
      await body();
    } catch (error) {
      const message = (error as Error)?.message ?? String(error);
      results.errors[name] = message;
      progress.note(`${name} failed: ${message}`);
      log.warn({ part: name, err: message }, `bench: ${name} failed; the other parts go on`);
    }
  };

  const removeTopics = once(() => deleteRunTopics(base, runId));
  // Ctrl-C or SIGTERM mid-run: the connector, its slot, the databases and topics still go.
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    progress.stop();
    log.warn(`bench: ${signal}; removing what the run created before exiting`);
    void (async () => {
      // Never hang on the way out: whatever is left after a minute is named in the log.
      setTimeout(() => process.exit(130), 60_000).unref();
      for (const c of cleanups) await c.run().catch((error: Error) => log.warn({ err: error.message }, `bench: cleanup of ${c.what} failed`));
      await removeTopics().catch(() => {});
      process.exit(130);
    })();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    admin = new Client(clientConfig(base.database, { database: 'postgres', application_name: 'outbox-bench-stats' }));
    await admin.connect();
    const kafka = createKafka(base, { role: 'bench' });

    await part('writer', async () => {
      const bench = await database('writer');
      const { config, pool } = bench;
      const codec = createCodec({ registry: config.registry, autoRegister: true, topicFor: topicForReplacement(config.connector.topicReplacement) });
      const avro = createOutboxWriter({ outbox: config.outbox, codec });
      const avroDelete = createOutboxWriter({ outbox: config.outbox, codec, deleteAfterInsert: true });
      const json = createOutboxWriter({ outbox: config.outbox, codec, contentType: 'application/json' });
      // Modes are interleaved over rounds and pooled, so drift in the machine's load (two cores shared
      // with the whole stack) spreads over every mode instead of landing on whichever ran last.
      const rounds = 3;
      const runs: WriterRun[] = [];
      const modes = [
        ['orders only', undefined, 'statement'],
        ['orders + outbox (Avro)', avro, 'statement'],
        ['orders + outbox (Avro, same statement)', avro, 'same-statement'],
        ['orders + outbox (Avro, insert-then-delete)', avroDelete, 'statement'],
        ['orders + outbox (JSON)', json, 'statement'],
      ] as const;
      const window = await startLoad(admin, config.database.database);
      const bar = progress.phase('writer overhead', rounds * modes.length, 'runs');
      for (let r = 0; r < rounds; r++) {
        for (const [index, [mode, writer, style]] of modes.entries()) {
          const run = await measureWriter(pool, mode, writer, options.concurrency, options.seconds / rounds, undefined, style);
          bar.update(r * modes.length + index + 1, { mode, 'tx/s': round(run.tps) });
          const pooled = runs[index];
          if (!pooled) runs[index] = run;
          else runs[index] = { mode, transactions: pooled.transactions + run.transactions, seconds: pooled.seconds + run.seconds, tps: (pooled.transactions + run.transactions) / (pooled.seconds + run.seconds) };
        }
      }
      bar.done();
      const load = await window.end();
      const baseTps = runs[0]?.tps ?? Number.NaN;
      results.writer = {
        concurrency: options.concurrency,
        runs: runs.map((r) => ({ ...r, tps: round(r.tps), seconds: round(r.seconds) })),
        ratio: round((runs[1]?.tps ?? Number.NaN) / baseTps, 3),
        ratioSameStatement: round((runs[2]?.tps ?? Number.NaN) / baseTps, 3),
        ratioDeleteAfterInsert: round((runs[3]?.tps ?? Number.NaN) / baseTps, 3),
        target: 0.85,
        load,
      };
      progress.note(`writer: ratio with outbox ${results.writer.ratio} (same statement ${results.writer.ratioSameStatement})`);
    });

    const pipelineSettings = { rates: options.rates, seconds: options.seconds, sustainedSeconds, writers, eventsPerTransaction, admin, progress };

    await part('cdc', async () => {
      const prefix = `bench${runId}cdc`;
      const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
      const bench = await database('cdc', { connector: { name: `outbox-bench-${runId}`, slotName: `outbox_bench_${runId}`, topicReplacement, topicPrefix: prefix } });
      const { config, pool } = bench;
      const topic = topicForReplacement(topicReplacement)('order');
      await createTopic(kafka, topic);
      cleanups.unshift({ what: `connector ${config.connector.name} and slot ${config.connector.slotName}`, run: once(() => deleteConnector(config, { dropSlot: true, force: true })) });
      const deployed = await deployConnector(config, { log: step });
      progress.note(`cdc: connector ${config.connector.name} ${deployed.action} and RUNNING`);
      await waitForSlot(admin as Client, config.connector.slotName, 60_000);
      const codec = createCodec({ registry: config.registry, autoRegister: true, topicFor: topicForReplacement(topicReplacement) });
      results.cdc = await measurePipeline({
        ...pipelineSettings,
        pipeline: 'cdc',
        consumer: `bench${runId}cdc-router`,
        config,
        pool,
        writer: createOutboxWriter({ outbox: config.outbox, codec }),
        topics: new RegExp(`^${prefix}\\.outbox\\.event\\.`),
      });
      // The connector and slot go now, not at the end: Debezium would otherwise keep working during the other parts.
      await cleanups.find((c) => c.what.startsWith('connector '))?.run();
    });

    await part('relay', async () => {
      const prefix = `bench${runId}relay`;
      const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
      const bench = await database('relay', { connector: { topicReplacement } });
      const { config, pool } = bench;
      await createTopic(kafka, topicForReplacement(topicReplacement)('order'));
      const relay = createRelay({ config, settings: { topicPartitions: PARTITIONS }, logger: step });
      await relay.start();
      try {
        const codec = createCodec({ registry: config.registry, autoRegister: true, topicFor: topicForReplacement(topicReplacement) });
        const run = await measurePipeline({
          ...pipelineSettings,
          pipeline: 'relay',
          consumer: `bench${runId}relay-router`,
          config,
          pool,
          writer: createOutboxWriter({ outbox: config.outbox, codec }),
          topics: new RegExp(`^${prefix}\\.outbox\\.event\\.`),
          relayQueries: () => relay.stats().queries,
        });
        const s = relay.settings;
        results.relay = { ...run, settings: { workers: s.workers, batchSize: s.batchSize, pollIntervalMs: s.pollIntervalMs } };
      } finally {
        await relay.stop();
      }
    });

    await part('raw', async () => {
      const codec = createCodec({ registry: base.registry, autoRegister: true, topicFor: topicForReplacement(`bench${runId}raw.outbox.event.\${routedByValue}`) });
      const window = await startLoad();
      const run = await measureRawKafka({ kafka, codec, topic: `bench${runId}raw.outbox.event.order`, partitions: PARTITIONS, seconds: Math.max(5, options.seconds), progress });
      results.raw = { ...run, load: await window.end() };
      progress.note(`raw kafka: ${run.eventsPerSecond} events/s produce -> consume`);
    });

    await part('router', async () => {
      const bench = await database('router');
      const events = options.routerEvents ?? Math.max(5_000, 2_500 * options.seconds);
      const bar = progress.phase('router vs raw consume', events * 3, 'records');
      const phases = ['fill', 'raw consume', 'router'];
      // CPU and database load while the router drains, not while the topic is filled.
      let window: Promise<LoadWindow> | undefined;
      const run = await measureRouterThroughput({
        config: bench.config,
        pool: bench.pool,
        events,
        partitions: PARTITIONS,
        onTick: (phase, done) => {
          if (phase === 'router' && !window) window = startLoad(admin, bench.config.database.database);
          bar.update(Math.max(0, phases.indexOf(phase)) * events + done, { phase });
        },
        name: `bench${runId}router`,
        onChild: (pid) => childPids.add(pid),
      });
      bar.done();
      results.router = { ...run, load: await (await (window ?? startLoad())).end() };
      progress.note(`router: ${run.router.eventsPerSecond} events/s vs raw ${run.rawConsume.eventsPerSecond} (ratio ${run.ratio}); RSS max ${run.router.rssMaxMb} MB`);
    });

    await part('watchdog', async () => {
      const bench = await database('watchdog');
      const bar = progress.phase('watchdog', 1, 'measurement');
      const window = await startLoad(admin, bench.config.database.database);
      let measured: WatchdogMeasurement | undefined;
      for (let attempt = 1; !measured; attempt++) {
        try {
          measured = await measureWatchdog({ config: bench.config });
        } catch (error) {
          // Other WAL traffic on a shared server can breach the probe's threshold early: try again once.
          if (attempt >= 2) throw error;
          progress.note(`watchdog: ${(error as Error).message}; trying again`);
        }
      }
      bar.update(1);
      bar.done();
      results.watchdog = { ...measured, load: await window.end() };
      progress.note(`watchdog: server time per poll p95 ${measured.serverMs.p95} ms; detection ${measured.detectionIntervals.join(', ')} intervals`);
    });

    if (only.has('cdc') || only.has('relay') || only.has('router')) results.stackMemory = stackMemoryMb();
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    for (const c of cleanups) {
      await c.run().catch((error: Error) => log.warn({ err: error.message }, `bench: cleanup of ${c.what} failed`));
    }
    await removeTopics().catch((error: Error) => log.warn({ err: error.message }, 'bench: topic cleanup failed'));
    await admin?.end().catch(() => {});
    progress.stop();
  }

  results.durationSeconds = round((Date.now() - started) / 1000);
  results.verdicts = buildVerdicts(results);
  results.missed = results.verdicts
    .filter((v) => v.pass === false)
    .map((v) => ({ id: v.id, what: v.what, value: v.value, target: `${v.target?.comparator} ${v.target?.value} ${v.unit}`, why: v.why ?? 'no explanation measured' }));
  mkdirSync(dirname(options.output), { recursive: true });
  writeFileSync(options.output, `${JSON.stringify(results, null, 2)}\n`);
  return results;
}

async function createTopic(kafka: ReturnType<typeof createKafka>, topic: string): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS }], waitForLeaders: true });
  } finally {
    await admin.disconnect();
  }
}

async function waitForSlot(admin: Client, slot: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await admin.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND active', [slot]);
    if (rows.length > 0) return;
    if (Date.now() > deadline) throw new Error(`bench: slot ${slot} not active within ${timeoutMs} ms: is the connector RUNNING? (outbox connector:status)`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Every topic and consumer group the run made (their names carry the run id). */
async function deleteRunTopics(config: OutboxConfig, runId: string): Promise<void> {
  const admin = createKafka(config, { role: 'bench-cleanup' }).admin();
  await admin.connect();
  try {
    const topics = (await admin.listTopics()).filter((t) => t.includes(runId));
    if (topics.length > 0) await admin.deleteTopics({ topics });
    const groups = (await admin.listGroups()).groups.map((g) => g.groupId).filter((g) => g.includes(runId));
    if (groups.length > 0) await admin.deleteGroups(groups).catch(() => {});
  } finally {
    await admin.disconnect();
  }
}

/**
 * A cleanup runs once, whether the run ends, fails or is interrupted (the signal handler and `finally`
 * share it); one that failed is tried again on the next call.
 */
function once<T>(fn: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () =>
    (pending ??= fn().catch((error: unknown) => {
      pending = undefined;
      throw error;
    }));
}
