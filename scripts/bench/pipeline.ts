/**
 * One pipeline (Debezium or the polling relay) end to end, measured from outside: the writer, the
 * router and the relay are separate processes, as an operator runs them, and this process only drives
 * and measures.
 *
 * - writer: a forked child (children/writer.ts) writing one event per autocommitted transaction at a
 *   fixed rate, the payload stamped with the database's `clock_timestamp()` at insert;
 * - router: `node dist/cli/main.js router --handlers build/scripts/bench/children/handlers.js`, whose handler
 *   records `clock_timestamp()` in its effect row inside the inbox transaction;
 * - relay (relay pipeline): `node dist/cli/main.js relay`.
 *
 * Commit → handled is handled_at − written_at, both from the database clock, computed in SQL after
 * each step; commit → Kafka | Kafka → handled uses the record's broker timestamp (the bench topics are
 * created with message.timestamp.type=LogAppendTime). Before anything is measured, the router has
 * joined its group, one probe event went through end to end (the connector or relay is streaming), and
 * the pipeline ran `warmupSeconds` at the first rate (JIT of the JVMs and of Node).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client, Pool } from 'pg';
import type { OutboxConfig } from 'outbox-router/config';
import type { Logger } from 'outbox-router/log';
import { BENCH_TABLES_DDL } from './children/handlers';
import { startBenchRouter, type CliProcess } from './cli-process';
import { backlogGrew, keptUp, nextRate, reached, skippedRates, sustainedMax, type StepOutcome } from './curve';
import { childPids, cpuPerEvent, startLoad, type Load } from './load';
import type { Progress } from './progress';
import { round } from './stats';
import type { EventLoopDelay, WriterMode } from './writer-protocol';
import { startWriterProcess, type WriterProcess } from './writer-process';

export type HandlerKind = 'per-event' | 'batch';

export interface Latency {
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

export interface StepRun extends StepOutcome {
  kind: 'listed' | 'probe';
  seconds: number;
  committed: number;
  reached: boolean;
  keptUp: boolean;
  handled: number;
  /** Handled while the writer ran (the CPU/event denominator). */
  handledInWindow: number;
  backlogMid: number;
  backlogEnd: number;
  /** Database clock at both ends: handled_at − written_at. */
  commitToHandledMs: Latency;
  /** written_at → the record's broker timestamp (LogAppendTime), and that → handled_at. */
  commitToKafkaMs: { p50: number; p99: number };
  kafkaToHandledMs: { p50: number; p99: number };
  eventLoopMs: Record<string, EventLoopDelay | undefined>;
  cpuUsPerEvent: Record<string, number>;
  load: Load;
  writerError?: string;
}

export interface PipelineRun {
  pipeline: 'cdc' | 'relay';
  writerMode: WriterMode;
  handler: HandlerKind;
  /** Router started → joined, and the first probe event handled (connector or relay streaming). */
  readySeconds: number;
  warmup: { rate: number; seconds: number; committed: number; handled: number };
  steps: StepRun[];
  /** Listed rates not measured: a lower rate was already past the knee. */
  skipped: number[];
  sustainedMax?: { rate: number; lowerBound: boolean };
}

export interface PipelineOptions {
  pipeline: 'cdc' | 'relay';
  config: OutboxConfig;
  pool: Pool;
  admin?: Client;
  /** A scratch directory for the child processes' settings files. */
  dir: string;
  /** Router consumer (inbox key and group). */
  consumer: string;
  /** Routed topics of this pipeline only. */
  topics: RegExp;
  partitions: number;
  rates: number[];
  seconds: number;
  warmupSeconds: number;
  /** Rates tried beyond the list to find the knee. */
  probes: number;
  writerMode: WriterMode;
  connections: number;
  handler: HandlerKind;
  /** Extra processes of the pipeline already started (the relay), measured with it. */
  others?: Record<string, CliProcess>;
  progress: Progress;
  log: Logger;
}

const DRAIN_TIMEOUT_MS = 60_000;
const SETTLE_TIMEOUT_MS = 180_000;

const LATENCY_SQL = `
WITH t AS (
  SELECT extract(epoch FROM h.handled_at - coalesce(h.written_at, w.written_at))::float8 * 1000 AS total,
         extract(epoch FROM h.kafka_at - coalesce(h.written_at, w.written_at))::float8 * 1000 AS to_kafka,
         extract(epoch FROM h.handled_at - h.kafka_at)::float8 * 1000 AS from_kafka
    FROM bench_handled h LEFT JOIN bench_written w ON w.id = h.id
   WHERE h.step = $1)
SELECT count(*)::int AS n,
       percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY total) AS total,
       max(total) AS max,
       percentile_disc(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY to_kafka) AS to_kafka,
       percentile_disc(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY from_kafka) AS from_kafka
  FROM t`;

/** Creates the effect tables the bench handler writes (children/handlers.ts). */
export async function createBenchTables(pool: Pool): Promise<void> {
  for (const ddl of BENCH_TABLES_DDL) await pool.query(ddl);
}

async function handledCount(pool: Pool, step: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM bench_handled WHERE step = $1', [step]);
  return rows[0]?.n ?? 0;
}

async function latency(pool: Pool, step: string): Promise<Pick<StepRun, 'commitToHandledMs' | 'commitToKafkaMs' | 'kafkaToHandledMs'>> {
  const { rows } = await pool.query<{ total: number[] | null; max: number | null; to_kafka: number[] | null; from_kafka: number[] | null }>(LATENCY_SQL, [step]);
  const r = rows[0];
  const at = (a: number[] | null | undefined, i: number) => (a && a[i] !== null && a[i] !== undefined ? round(a[i] as number) : Number.NaN);
  return {
    commitToHandledMs: { p50: at(r?.total, 0), p95: at(r?.total, 1), p99: at(r?.total, 2), max: r?.max === null || r?.max === undefined ? Number.NaN : round(r.max) },
    commitToKafkaMs: { p50: at(r?.to_kafka, 0), p99: at(r?.to_kafka, 1) },
    kafkaToHandledMs: { p50: at(r?.from_kafka, 0), p99: at(r?.from_kafka, 1) },
  };
}

async function waitHandled(pool: Pool, step: string, total: number, timeoutMs: number, onTick?: (n: number) => void): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let n = await handledCount(pool, step);
  while (n < total && Date.now() < deadline) {
    onTick?.(n);
    await sleep(200);
    n = await handledCount(pool, step);
  }
  return n;
}

export async function measurePipeline(options: PipelineOptions): Promise<PipelineRun> {
  const { pool, progress, pipeline } = options;
  await createBenchTables(pool);
  const started = Date.now();
  const router = startBenchRouter({ ...options, topics: options.topics.source, args: ['--partitions', String(options.partitions)] });
  let writer: WriterProcess | undefined;
  try {
    await router.healthy(120_000);
    writer = await startWriterProcess(options.config, options.writerMode, options.connections);
    childPids.set(writer.pid, 'writer');
    // One probe event end to end: the connector (or relay) is streaming and the router applies.
    const probe = `${pipeline}-probe`;
    await writer.run(probe, 5, 1);
    if ((await waitHandled(pool, probe, 5, 120_000)) < 5) throw new Error(`bench: ${pipeline}: probe events not handled within 120 s; ${router.problems().slice(-3).join(' | ')}`);
    const readySeconds = round((Date.now() - started) / 1000, 2);
    progress.note(`${pipeline}: router joined and a probe went through in ${readySeconds} s; warming up ${options.warmupSeconds} s at ${options.rates[0]}/s`);

    const processes = { router, ...options.others };
    const w = writer;
    const step = (label: string, rate: number, seconds: number) => measureStep({ ...options, writer: w, processes }, label, rate, seconds);
    const warmRate = options.rates[0] ?? 100;
    const warm = await step(`${pipeline}-warmup`, warmRate, options.warmupSeconds);

    const steps: StepRun[] = [];
    for (let next = nextRate(options.rates, steps, options.probes); next; next = nextRate(options.rates, steps, options.probes)) {
      const run = await step(`${pipeline}@${next.rate}`, next.rate, options.seconds);
      const s: StepRun = { ...run, kind: next.kind };
      steps.push(s);
      progress.note(
        `${pipeline} @${s.rate}/s: reached ${s.reachedPerSec}/s; commit -> handled p50 ${s.commitToHandledMs.p50} / p99 ${s.commitToHandledMs.p99} ms ` +
          `(Kafka split p99 ${s.commitToKafkaMs.p99} | ${s.kafkaToHandledMs.p99}); backlog ${s.backlogMid} -> ${s.backlogEnd}; ${s.keptUp ? 'kept up' : 'past the knee'}`,
      );
    }
    const max = sustainedMax(steps);
    return {
      pipeline,
      writerMode: options.writerMode,
      handler: options.handler,
      readySeconds,
      warmup: { rate: warmRate, seconds: warm.seconds, committed: warm.committed, handled: warm.handled },
      steps,
      skipped: skippedRates(options.rates, steps),
      ...(max ? { sustainedMax: max } : {}),
    };
  } finally {
    await writer?.stop().catch(() => {});
    await router.stop().catch(() => {});
  }
}

type StepContext = PipelineOptions & { writer: WriterProcess; processes: Record<string, CliProcess> };

/** One rate: write for `seconds`, sample CPU and event loops over the writing, drain, then the latency in SQL. */
async function measureStep(ctx: StepContext, label: string, rate: number, seconds: number): Promise<Omit<StepRun, 'kind'>> {
  const { pool, writer, processes, progress } = ctx;
  for (const p of Object.values(processes)) await p.eventLoop().catch(() => undefined);
  const window = await startLoad(ctx.admin, ctx.config.database.database);
  const total = Math.round(rate * seconds);
  const bar = progress.phase(label, total, 'committed');
  let done = 0;
  let mid: Promise<{ done: number; handled: number }> | undefined;
  const midTimer = setTimeout(() => {
    const at = done;
    mid = handledCount(pool, label).then((handled) => ({ done: at, handled }));
  }, (seconds * 1000) / 2);
  let writerError: string | undefined;
  const result = await writer.run(label, rate, seconds, (d) => {
    done = d;
    bar.update(d);
  });
  clearTimeout(midTimer);
  if (result.run.firstError) writerError = `${result.run.failed} writes failed, first: ${result.run.firstError}`;
  const handledEnd = await handledCount(pool, label);
  const load = await window.end();
  const eventLoopMs: Record<string, EventLoopDelay | undefined> = { writer: result.eventLoopMs };
  for (const [name, p] of Object.entries(processes)) eventLoopMs[name] = await p.eventLoop().catch(() => undefined);
  bar.done();
  const committed = result.run.done;
  const m = (await mid) ?? { done: 0, handled: 0 };
  // The writer's progress is up to 100 ms old when the middle is read: a backlog is never below 0.
  const backlogMid = Math.max(0, m.done - m.handled);
  const backlogEnd = Math.max(0, committed - handledEnd);
  const handled = await waitHandled(pool, label, committed, DRAIN_TIMEOUT_MS);
  await sleep(1000);
  const lat = await latency(pool, label);
  if (handled < committed) {
    // Past the knee: the next step starts on an empty pipeline, not on this one's backlog.
    progress.note(`${label}: ${committed - handled} events still in the pipeline after ${DRAIN_TIMEOUT_MS / 1000} s; waiting up to ${SETTLE_TIMEOUT_MS / 1000} s more before the next step`);
    await waitHandled(pool, label, committed, SETTLE_TIMEOUT_MS);
  }
  const reachedPerSec = round(committed / Math.max(0.001, result.run.seconds));
  const outcome: StepOutcome = {
    rate,
    reachedPerSec,
    missing: committed - handled,
    backlogGrew: backlogGrew(backlogMid, backlogEnd, committed - m.done),
    p99: lat.commitToHandledMs.p99,
  };
  return {
    ...outcome,
    ...lat,
    seconds: round(result.run.seconds, 2),
    committed,
    reached: reached(outcome),
    keptUp: keptUp(outcome),
    handled,
    handledInWindow: handledEnd,
    backlogMid,
    backlogEnd,
    eventLoopMs,
    cpuUsPerEvent: cpuPerEvent(load, handledEnd),
    load,
    ...(writerError ? { writerError } : {}),
  };
}
