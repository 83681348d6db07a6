import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from 'pg';
import { createCodec, topicForReplacement } from 'outbox-router/codec';
import type { OutboxConfig } from 'outbox-router/config';
import { deleteConnector, deployConnector } from 'outbox-router/connector';
import type { createKafka } from 'outbox-router/kafka';
import type { Logger } from 'outbox-router/log';
import { createOutboxWriter } from 'outbox-router/producer';
import { measureWatchdog, type WatchdogMeasurement } from 'outbox-router/watchdog';
import type { BenchDatabase, createBenchDatabase } from './bench-db';
import { startCliProcess, type CliProcess } from './cli-process';
import { childPids, startLoad } from './load';
import { measurePipeline, type HandlerKind, type PipelineRun } from './pipeline';
import type { Progress } from './progress';
import { measureRawKafka } from './raw-kafka';
import { measureRouterThroughput } from './router-throughput';
import { round } from './stats';
import { measureWriter, type WriterRun } from './writer-overhead';
import type { BenchOptions, BenchResults, WriterResults } from './types';

export const PARTITIONS = 4;

export interface Cleanup {
  what: string;
  run: () => Promise<unknown>;
}

/** What the parts of one bench run share: its id, scratch directory, connections, results and cleanups. */
export interface BenchRun {
  runId: string;
  dir: string;
  base: OutboxConfig;
  options: BenchOptions;
  results: BenchResults;
  progress: Progress;
  log: Logger;
  /** Quiet logger for the connector deploy. */
  step: Logger;
  kafka: ReturnType<typeof createKafka>;
  admin: Client;
  /** Run in order at the end (and on a signal); a part adds its own at the front. */
  cleanups: Cleanup[];
  /** A throw-away database named after the run, dropped by the cleanups. */
  database: (suffix: string, overrides?: Parameters<typeof createBenchDatabase>[0]) => Promise<BenchDatabase>;
  /** A routed topic of the run, made before its producer starts (removed with the run's topics at the end). */
  createTopic: (topic: string) => Promise<void>;
}

export async function measureWriterPart(b: BenchRun): Promise<void> {
  b.results.writer = await writerOverhead(await b.database('writer'), b.options, b.progress, b.admin);
  b.progress.note(`writer: ratio with outbox ${b.results.writer.ratio} (same statement ${b.results.writer.ratioSameStatement})`);
}

/** The CDC curve once per handler form, each on its own database, connector, slot and topic. */
export async function measureCdcPart(b: BenchRun): Promise<void> {
  for (const handler of b.options.handlers) {
    const run = await cdcCurve(b, handler);
    if (handler === 'batch') b.results.cdcBatch = run;
    else b.results.cdc = run;
  }
}

async function cdcCurve(b: BenchRun, handler: HandlerKind): Promise<PipelineRun> {
  const { runId, progress, admin, cleanups } = b;
  const form = handler === 'batch' ? 'batch' : 'event';
  const prefix = `bench${runId}cdc${form}`;
  const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
  const bench = await b.database(`cdc_${form}`, {
    connector: { name: `outbox-bench-${runId}-${form}`, slotName: `outbox_bench_${runId}_${form}`, topicReplacement, topicPrefix: prefix, exactlyOnce: b.options.exactlyOnce ?? false },
  });
  const { config } = bench;
  // Routed topics exist before the connector: broker timestamps (LogAppendTime), the bench's partitions.
  await b.createTopic(topicForReplacement(topicReplacement)('order'));
  const removeConnector = once(() => deleteConnector(config, { dropSlot: true, force: true }));
  cleanups.unshift({ what: `connector ${config.connector.name} and slot ${config.connector.slotName}`, run: removeConnector });
  const deployed = await deployConnector(config, { log: b.step });
  progress.note(`cdc (${handler} handler): connector ${config.connector.name} ${deployed.action} and RUNNING`);
  await waitForSlot(admin, config.connector.slotName, 60_000);
  try {
    return await curve(b, 'cdc', handler, bench, prefix);
  } finally {
    // The connector and slot go now, not at the end: Debezium would otherwise keep working during the other parts.
    await removeConnector();
  }
}

/** The relay curve once per handler form, each on its own database and topic. */
export async function measureRelayPart(b: BenchRun): Promise<void> {
  for (const handler of b.options.handlers) {
    const form = handler === 'batch' ? 'batch' : 'event';
    const prefix = `bench${b.runId}relay${form}`;
    const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
    const bench = await b.database(`relay_${form}`, { connector: { topicReplacement } });
    await b.createTopic(topicForReplacement(topicReplacement)('order'));
    const relay = startCliProcess({ command: 'relay', args: [], config: bench.config, dir: b.dir, log: b.log });
    childPids.set(relay.pid, 'relay');
    try {
      await relay.healthy(60_000);
      const run = await curve(b, 'relay', handler, bench, prefix, { relay });
      const s = bench.config.relay;
      const result = { ...run, settings: { workers: s.workers, batchSize: s.batchSize, pollIntervalMs: s.pollIntervalMs } };
      if (handler === 'batch') b.results.relayBatch = result;
      else b.results.relay = result;
    } finally {
      await relay.stop();
    }
  }
}

export async function measureRawPart({ runId, base, kafka, options, results, progress }: BenchRun): Promise<void> {
  const codec = createCodec({ registry: base.registry, autoRegister: true, topicFor: topicForReplacement(`bench${runId}raw.outbox.event.\${routedByValue}`) });
  const window = await startLoad();
  const run = await measureRawKafka({ kafka, codec, topic: `bench${runId}raw.outbox.event.order`, partitions: PARTITIONS, seconds: Math.max(5, Math.min(options.seconds, 10)), progress });
  results.raw = { ...run, load: await window.end() };
  progress.note(`raw kafka: ${run.eventsPerSecond} events/s produce -> consume`);
}

export async function measureRouterPart(b: BenchRun): Promise<void> {
  const { progress } = b;
  const bench = await b.database('router');
  const events = b.options.routerEvents;
  const phases = ['fill', 'raw consume', 'router (per-event)', 'router (batch)'];
  const bar = progress.phase('router vs raw consume', events * phases.length, 'records');
  const run = await measureRouterThroughput({
    config: bench.config,
    pool: bench.pool,
    events,
    partitions: PARTITIONS,
    onTick: (phase, done) => bar.update(Math.max(0, phases.indexOf(phase)) * events + done, { phase }),
    name: `bench${b.runId}router`,
    dir: b.dir,
    admin: b.admin,
    log: b.log,
  });
  bar.done();
  b.results.router = run;
  const batch = run.batch.supported ? `${run.batch.eventsPerSecond} events/s` : run.batch.reason;
  progress.note(`router: per-event ${run.perEvent.eventsPerSecond} events/s, batch ${batch}, raw ${run.rawConsume.eventsPerSecond} (ratio ${run.ratio})`);
}

export async function measureWatchdogPart(b: BenchRun): Promise<void> {
  const { progress } = b;
  const bench = await b.database('watchdog');
  const bar = progress.phase('watchdog', 1, 'measurement');
  const window = await startLoad(b.admin, bench.config.database.database);
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
  b.results.watchdog = { ...measured, load: await window.end() };
  progress.note(`watchdog: server time per poll p95 ${measured.serverMs.p95} ms; detection ${measured.detectionIntervals.join(', ')} intervals`);
}

/** The latency-versus-rate curve of one pipeline, writer and router (and relay) each in its own process. */
function curve(b: BenchRun, pipeline: 'cdc' | 'relay', handler: HandlerKind, bench: BenchDatabase, prefix: string, others?: Record<string, CliProcess>) {
  const { options } = b;
  return measurePipeline({
    pipeline,
    config: bench.config,
    pool: bench.pool,
    admin: b.admin,
    dir: b.dir,
    consumer: `${prefix}-router`,
    topics: new RegExp(`^${prefix}\\.outbox\\.event\\.`),
    partitions: PARTITIONS,
    rates: options.rates,
    seconds: options.seconds,
    warmupSeconds: options.warmupSeconds,
    probes: options.probes,
    writerMode: options.writerMode,
    connections: options.writerConnections,
    handler,
    ...(others ? { others } : {}),
    progress: b.progress,
    log: b.log,
  });
}

/** A bench topic stamped with broker time, so a record's timestamp is when Kafka appended it. */
export async function createTopic(kafka: ReturnType<typeof createKafka>, topic: string): Promise<void> {
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

/**
 * A cleanup runs once, whether the run ends, fails or is interrupted (the signal handler and `finally`
 * share it); one that failed is tried again on the next call.
 */
export function once<T>(fn: () => Promise<T>): () => Promise<T> {
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
