/**
 * The pipeline's cost when nothing happens: each pipeline as an operator runs it (CDC: the connector,
 * `outbox router` and `outbox watchdog`; relay: `outbox relay`, the router and the watchdog), every
 * part in its own process, probed end to end once, then left alone while /proc is sampled. What a
 * deployment pays around the clock, events or not.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { deleteConnector, deployConnector } from 'outbox-router/connector';
import type { BenchDatabase } from './bench-db';
import { startBenchRouter, startCliProcess, type CliProcess } from './cli-process';
import { childPids, inPipelineAtRest, startLoad } from './load';
import { once, type BenchRun } from './parts';
import { createBenchTables } from './pipeline';
import { round } from './stats';
import type { IdleResults } from './types';
import { startWriterProcess } from './writer-process';

/** After the probe, the processes settle (JIT, the first offset commits) before the window opens. */
const SETTLE_SECONDS = 5;

export async function measureIdlePart(b: BenchRun, pipelines: ReadonlyArray<'cdc' | 'relay'>): Promise<void> {
  const seconds = b.options.idleSeconds;
  const results: IdleResults = { seconds };
  b.results.idle = results;
  for (const pipeline of pipelines) {
    const prefix = `bench${b.runId}idle${pipeline}`;
    const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
    const bench = await b.database(`idle_${pipeline}`, {
      connector: pipeline === 'cdc' ? { name: `outbox-bench-idle-${b.runId}`, slotName: `outbox_bench_idle_${b.runId}`, topicReplacement, topicPrefix: prefix } : { topicReplacement },
    });
    await b.createTopic(`${prefix}.outbox.event.order`);
    const processes: CliProcess[] = [];
    const removeConnector = once(() => deleteConnector(bench.config, { dropSlot: true, force: true }));
    try {
      if (pipeline === 'cdc') {
        b.cleanups.unshift({ what: `connector ${bench.config.connector.name}`, run: removeConnector });
        await deployConnector(bench.config, { log: b.step });
      } else {
        const relay = startCliProcess({ command: 'relay', args: [], config: bench.config, dir: b.dir, log: b.log });
        childPids.set(relay.pid, 'relay');
        processes.push(relay);
      }
      const router = startBenchRouter({ config: bench.config, dir: b.dir, log: b.log, handler: b.options.handlers[0] ?? 'per-event', consumer: `${prefix}-router`, topics: `^${prefix}\\.outbox\\.event\\.` });
      processes.push(router);
      const watchdog = startCliProcess({ command: 'watchdog', args: [], config: bench.config, dir: b.dir, log: b.log });
      childPids.set(watchdog.pid, 'watchdog');
      processes.push(watchdog);
      for (const p of processes) await p.healthy(120_000);
      await probe(bench, pipeline);
      b.progress.note(`idle ${pipeline}: probe handled; settling ${SETTLE_SECONDS} s, then ${seconds} s with no events`);
      await sleep(SETTLE_SECONDS * 1000);
      const bar = b.progress.phase(`idle ${pipeline}`, seconds, 's');
      const window = await startLoad(b.admin, bench.config.database.database);
      for (let s = 1; s <= seconds; s++) {
        await sleep(1000);
        bar.update(s);
      }
      const load = await window.end();
      bar.done();
      const pipelinePct = round(Object.entries(load.cpuPct).reduce((sum, [group, pct]) => sum + (!inPipelineAtRest(group) ? 0 : pct), 0));
      results[pipeline] = { load, pipelinePct };
      b.progress.note(`idle ${pipeline}: the pipeline used ${pipelinePct} % of one core (${describe(load.cpuPct)})`);
    } finally {
      for (const p of processes.reverse()) await p.stop().catch(() => {});
      if (pipeline === 'cdc') await removeConnector().catch(() => {});
    }
  }
}

/** Five events end to end through the pipeline, so every part has connected and done its first work. */
async function probe(bench: BenchDatabase, pipeline: string): Promise<void> {
  await createBenchTables(bench.pool);
  const writer = await startWriterProcess(bench.config, 'sql', 1);
  childPids.set(writer.pid, 'writer');
  try {
    await writer.run(`idle-${pipeline}-probe`, 5, 1);
  } finally {
    await writer.stop();
  }
  const deadline = Date.now() + 120_000;
  for (;;) {
    const { rows } = await bench.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM bench_handled WHERE step = $1', [`idle-${pipeline}-probe`]);
    if ((rows[0]?.n ?? 0) >= 5) return;
    if (Date.now() > deadline) throw new Error(`bench: idle ${pipeline}: the probe events were not handled within 120 s`);
    await sleep(200);
  }
}

function describe(cpuPct: Record<string, number>): string {
  return Object.entries(cpuPct)
    .filter(([group]) => inPipelineAtRest(group))
    .sort((x, y) => y[1] - x[1])
    .map(([group, pct]) => `${group} ${pct}`)
    .join(', ');
}
