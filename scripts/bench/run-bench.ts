import { cpus, loadavg, tmpdir } from 'node:os';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Client } from 'pg';
import { loadConfig, type OutboxConfig } from 'outbox-router/config';
import { clientConfig } from 'outbox-router/db';
import { createKafka } from 'outbox-router/kafka';
import { createLogger, type Logger } from 'outbox-router/log';
import { createStack } from '../stack/stack';
import { createBenchDatabase, type BenchDatabase } from './bench-db';
import { chartSpec, renderChart, type ChartPoint } from './chart';
import { readStackScope, setStackScope, stackMemoryMb } from './load';
import { defaultStateDir } from '../stack/paths';
import {
  createTopic,
  measureCdcPart,
  measureRawPart,
  measureRelayPart,
  measureRouterPart,
  measureWatchdogPart,
  measureWriterPart,
  once,
  PARTITIONS,
  type BenchRun,
  type Cleanup,
} from './parts';
import { measureIdlePart } from './idle';
import { createProgress } from './progress';
import { round } from './stats';
import { buildVerdicts, pipelineRuns } from './verdicts';
import { type BenchOptions, type BenchResults, type Part } from './types';

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
  const cleanups: Cleanup[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'outbox-bench-'));
  cleanups.push({ what: `directory ${dir}`, run: async () => rmSync(dir, { recursive: true, force: true }) });
  /** Set by SIGINT/SIGTERM: no further part starts. */
  let interrupted = false;
  const results = emptyResults(options, only);

  const step = createLogger({ name: 'bench', level: 'warn' });
  const base = loadConfig();
  await createStack().up((e) => log.debug({ step: e.step }, e.detail));
  // Only this stack's PostgreSQL and JVMs count as the pipeline: another profile or server on the machine is `other`.
  setStackScope(readStackScope(defaultStateDir()));
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
    void cleanUpAndExit(cleanups, removeTopics, log);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    admin = new Client(clientConfig(base.database, { database: 'postgres', application_name: 'outbox-bench-stats' }));
    await admin.connect();
    const kafka = createKafka(base, { role: 'bench' });
    const run: BenchRun = { runId, dir, base, options, results, progress, log, step, kafka, admin, cleanups, database, createTopic: (topic) => createTopic(kafka, topic) };
    await part('idle', () => measureIdlePart(run, ['cdc', 'relay']));
    await part('writer', () => measureWriterPart(run));
    await part('cdc', () => measureCdcPart(run));
    await part('relay', () => measureRelayPart(run));
    await part('raw', () => measureRawPart(run));
    await part('router', () => measureRouterPart(run));
    await part('watchdog', () => measureWatchdogPart(run));
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
  await writeResults(results, options.output);
  return results;
}

/** The machine and the options the run was started with; every measurement is added to it. */
function emptyResults(options: BenchOptions, only: Set<Part>): BenchResults {
  const { log: _log, tty: _tty, output: _output, ...recorded } = options;
  return {
    machine: { cpus: cpus().length, node: process.version, when: new Date().toISOString(), loadavgStart: loadavg().map((l) => round(l, 2)) },
    options: { ...recorded, only: [...only], partitions: PARTITIONS },
    errors: {},
    verdicts: [],
    missed: [],
    durationSeconds: 0,
  };
}

/** Verdicts, the missed targets and the chart, then results.json. */
async function writeResults(results: BenchResults, output: string): Promise<void> {
  results.verdicts = buildVerdicts(results);
  results.missed = results.verdicts
    .filter((v) => v.pass === false)
    .map((v) => ({ id: v.id, what: v.what, value: v.value, target: `${v.target?.comparator} ${v.target?.value} ${v.unit}`, why: v.why ?? 'no explanation measured' }));
  mkdirSync(dirname(output), { recursive: true });
  if (pipelineRuns(results).length > 0) results.chart = await drawChart(results, join(dirname(output), 'latency-vs-rate.svg'));
  writeFileSync(output, `${JSON.stringify(results, null, 2)}\n`);
}

/** After a signal: every cleanup, then exit 130. */
async function cleanUpAndExit(cleanups: Cleanup[], removeTopics: () => Promise<void>, log: Logger): Promise<void> {
  // Never hang on the way out: whatever is left after a minute is named in the log.
  setTimeout(() => process.exit(130), 60_000).unref();
  for (const c of cleanups) await c.run().catch((error: Error) => log.warn({ err: error.message }, `bench: cleanup of ${c.what} failed`));
  await removeTopics().catch(() => {});
  process.exit(130);
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

/** The curve of each pipeline as an SVG beside results.json. */
async function drawChart(results: BenchResults, file: string): Promise<{ file?: string; note?: string }> {
  const pipelines = pipelineRuns(results).map(([, run]) => [`${run.pipeline === 'cdc' ? 'CDC' : 'relay'}, ${run.handler}`, run] as const);
  const points: ChartPoint[] = [];
  const maxima: Array<{ pipeline: string; rate: number }> = [];
  for (const [name, run] of pipelines) {
    if (!run) continue;
    for (const s of run.steps) points.push({ pipeline: name, rate: s.reachedPerSec, asked: s.rate, p50: s.commitToHandledMs.p50, p99: s.commitToHandledMs.p99 });
    if (run.sustainedMax) maxima.push({ pipeline: name, rate: run.sustainedMax.rate });
  }
  const title = `commit → handled vs rate (${results.machine.when.slice(0, 10)}, ${results.machine.cpus} cores)`;
  try {
    const note = await renderChart(chartSpec({ title, points, maxima }), file);
    return note ? { note } : { file };
  } catch (error) {
    return { note: `chart failed: ${(error as Error).message}` };
  }
}
