import { setTimeout as sleep } from 'node:timers/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Client } from 'pg';
import { createCodec, topicForReplacement } from 'outbox-router/codec';
import { loadConfig, type OutboxConfig } from 'outbox-router/config';
import { deleteConnector, deployConnector } from 'outbox-router/connector';
import { clientConfig } from 'outbox-router/db';
import { createKafka } from 'outbox-router/kafka';
import { createLogger } from 'outbox-router/log';
import { createOutboxWriter } from 'outbox-router/producer';
import { measureWatchdog, type WatchdogMeasurement } from 'outbox-router/watchdog';
import { createStack } from '../stack/stack';
import { createBenchDatabase, type BenchDatabase } from './bench-db';
import { chartSpec, renderChart, type ChartPoint } from './chart';
import { startCliProcess, type CliProcess } from './cli-process';
import { childPids, startLoad, stackMemoryMb } from './load';
import { measurePipeline } from './pipeline';
import { createProgress, type Progress } from './progress';
import { measureRawKafka } from './raw-kafka';
import { measureRouterThroughput } from './router-throughput';
import { round } from './stats';
import { buildVerdicts } from './verdicts';
import { measureWriter, type WriterRun } from './writer-overhead';
import { type BenchOptions, type BenchResults, type Part, type WriterResults } from './types';

const PARTITIONS = 4;

/**
 * One run on the local stack, every part side by side (or the `only` subset): writer overhead, the
 * latency-versus-rate curve of the CDC and relay pipelines (writer, router and relay each in its own
 * process), raw Kafka, the router CLI against raw consumption (per-event and batch handlers), and the
 * watchdog. Each part gets throw-away databases and topics named after the run, all removed at the
 * end, also when a part fails.
 */
export async function runBench(options: BenchOptions): Promise<BenchResults> {
  const { log } = options;
  const started = Date.now();
  const only = new Set(options.only);
  const progress = createProgress({ tty: options.tty ?? false, log });
  const runId = Date.now().toString(36);
  const cleanups: Array<{ what: string; run: () => Promise<unknown> }> = [];
  const dir = mkdtempSync(join(tmpdir(), 'outbox-bench-'));
  cleanups.push({ what: `directory ${dir}`, run: async () => rmSync(dir, { recursive: true, force: true }) });
  /** Set by SIGINT/SIGTERM: no further part starts. */
  let interrupted = false;
  const { log: _log, tty: _tty, output: _output, ...recorded } = options;
  const results: BenchResults = {
    machine: { cpus: cpus().length, node: process.version, when: new Date().toISOString(), loadavgStart: loadavg().map((l) => round(l, 2)) },
    options: { ...recorded, only: [...only], partitions: PARTITIONS },
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
      results.writer = await writerOverhead(await database('writer'), options, progress, admin);
      progress.note(`writer: ratio with outbox ${results.writer.ratio} (same statement ${results.writer.ratioSameStatement})`);
    });

    const curve = (pipeline: 'cdc' | 'relay', bench: BenchDatabase, prefix: string, others?: Record<string, CliProcess>) =>
      measurePipeline({
        pipeline,
        config: bench.config,
        pool: bench.pool,
        admin,
        dir,
        consumer: `${prefix}-router`,
        topics: new RegExp(`^${prefix}\\.outbox\\.event\\.`),
        partitions: PARTITIONS,
        rates: options.rates,
        seconds: options.seconds,
        warmupSeconds: options.warmupSeconds,
        probes: options.probes,
        writerMode: options.writerMode,
        connections: options.writerConnections,
        handler: options.handler,
        ...(others ? { others } : {}),
        progress,
        log,
      });

    await part('cdc', async () => {
      const prefix = `bench${runId}cdc`;
      const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
      const bench = await database('cdc', { connector: { name: `outbox-bench-${runId}`, slotName: `outbox_bench_${runId}`, topicReplacement, topicPrefix: prefix } });
      const { config } = bench;
      // Routed topics exist before the connector: broker timestamps (LogAppendTime), the bench's partitions.
      await createTopic(kafka, topicForReplacement(topicReplacement)('order'));
      cleanups.unshift({ what: `connector ${config.connector.name} and slot ${config.connector.slotName}`, run: once(() => deleteConnector(config, { dropSlot: true, force: true })) });
      const deployed = await deployConnector(config, { log: step });
      progress.note(`cdc: connector ${config.connector.name} ${deployed.action} and RUNNING`);
      await waitForSlot(admin as Client, config.connector.slotName, 60_000);
      results.cdc = await curve('cdc', bench, prefix);
      // The connector and slot go now, not at the end: Debezium would otherwise keep working during the other parts.
      await cleanups.find((c) => c.what.startsWith('connector '))?.run();
    });

    await part('relay', async () => {
      const prefix = `bench${runId}relay`;
      const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
      const bench = await database('relay', { connector: { topicReplacement } });
      await createTopic(kafka, topicForReplacement(topicReplacement)('order'));
      const relay = startCliProcess({ command: 'relay', args: [], config: bench.config, dir, log });
      childPids.set(relay.pid, 'relay');
      try {
        await relay.healthy(60_000);
        const run = await curve('relay', bench, prefix, { relay });
        const s = bench.config.relay;
        results.relay = { ...run, settings: { workers: s.workers, batchSize: s.batchSize, pollIntervalMs: s.pollIntervalMs } };
      } finally {
        await relay.stop();
      }
    });

    await part('raw', async () => {
      const codec = createCodec({ registry: base.registry, autoRegister: true, topicFor: topicForReplacement(`bench${runId}raw.outbox.event.\${routedByValue}`) });
      const window = await startLoad();
      const run = await measureRawKafka({ kafka, codec, topic: `bench${runId}raw.outbox.event.order`, partitions: PARTITIONS, seconds: Math.max(5, Math.min(options.seconds, 10)), progress });
      results.raw = { ...run, load: await window.end() };
      progress.note(`raw kafka: ${run.eventsPerSecond} events/s produce -> consume`);
    });

    await part('router', async () => {
      const bench = await database('router');
      const events = options.routerEvents;
      const phases = ['fill', 'raw consume', 'router (per-event)', 'router (batch)'];
      const bar = progress.phase('router vs raw consume', events * phases.length, 'records');
      const run = await measureRouterThroughput({
        config: bench.config,
        pool: bench.pool,
        events,
        partitions: PARTITIONS,
        onTick: (phase, done) => bar.update(Math.max(0, phases.indexOf(phase)) * events + done, { phase }),
        name: `bench${runId}router`,
        dir,
        admin,
        log,
      });
      bar.done();
      results.router = run;
      const batch = run.batch.supported ? `${run.batch.eventsPerSecond} events/s` : run.batch.reason;
      progress.note(`router: per-event ${run.perEvent.eventsPerSecond} events/s, batch ${batch}, raw ${run.rawConsume.eventsPerSecond} (ratio ${run.ratio})`);
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
    results.machine.loadavgEnd = loadavg().map((l) => round(l, 2));
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
  if (results.cdc || results.relay) results.chart = await drawChart(results, join(dirname(options.output), 'latency-vs-rate.svg'));
  writeFileSync(options.output, `${JSON.stringify(results, null, 2)}\n`);
  return results;
}

/** A bench topic stamped with broker time, so a record's timestamp is when Kafka appended it. */
async function createTopic(kafka: ReturnType<typeof createKafka>, topic: string): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS, configEntries: [{ name: 'message.timestamp.type', value: 'LogAppendTime' }] }], waitForLeaders: true });
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
    await sleep(200);
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

async function writerOverhead(bench: BenchDatabase, options: BenchOptions, progress: Progress, admin: Client | undefined): Promise<WriterResults> {
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
      const run = await measureWriter(pool, mode, writer, options.concurrency, options.writerSeconds / rounds, undefined, style);
      bar.update(r * modes.length + index + 1, { mode, 'tx/s': round(run.tps) });
      const pooled = runs[index];
      if (!pooled) runs[index] = run;
      else runs[index] = { mode, transactions: pooled.transactions + run.transactions, seconds: pooled.seconds + run.seconds, tps: (pooled.transactions + run.transactions) / (pooled.seconds + run.seconds) };
    }
  }
  bar.done();
  const load = await window.end();
  const baseTps = runs[0]?.tps ?? Number.NaN;
  return {
    concurrency: options.concurrency,
    runs: runs.map((r) => ({ ...r, tps: round(r.tps), seconds: round(r.seconds) })),
    ratio: round((runs[1]?.tps ?? Number.NaN) / baseTps, 3),
    ratioSameStatement: round((runs[2]?.tps ?? Number.NaN) / baseTps, 3),
    ratioDeleteAfterInsert: round((runs[3]?.tps ?? Number.NaN) / baseTps, 3),
    target: 0.85,
    load,
  };
}

/** The curve of each pipeline as an SVG beside results.json. */
async function drawChart(results: BenchResults, file: string): Promise<{ file?: string; note?: string }> {
  const pipelines = [
    ['CDC', results.cdc],
    ['relay', results.relay],
  ] as const;
  const points: ChartPoint[] = [];
  const maxima: Array<{ pipeline: string; rate: number }> = [];
  for (const [name, run] of pipelines) {
    if (!run) continue;
    for (const s of run.steps) points.push({ pipeline: name, rate: s.reachedPerSec, asked: s.rate, p50: s.commitToHandledMs.p50, p99: s.commitToHandledMs.p99 });
    if (run.sustainedMax) maxima.push({ pipeline: name, rate: run.sustainedMax.rate });
  }
  const title = `commit → handled vs rate (${results.machine.when.slice(0, 10)}, ${results.machine.cpus} cores, ${results.cdc?.handler ?? results.relay?.handler} handler)`;
  try {
    const note = await renderChart(chartSpec({ title, points, maxima }), file);
    return note ? { note } : { file };
  } catch (error) {
    return { note: `chart failed: ${(error as Error).message}` };
  }
}
