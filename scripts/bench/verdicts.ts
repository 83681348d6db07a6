import { inPipelineAtRest, pipelineCpuPerEvent } from './load';
import { round } from './stats';
import type { PipelineRun, StepRun } from './pipeline';
import type { RouterThroughputRun } from './router-throughput';
import type { BenchResults } from './types';
import { cpuNote, LABELS, LATENCY_TARGETS, SUSTAINED_P99_MS, TARGETS, verdict, type Verdict } from './targets';
import type { EventLoopDelay } from './writer-protocol';

/** Every figure of a run beside its target (or none), with a `why` for each one missed. Pure. */
export function buildVerdicts(results: BenchResults): Verdict[] {
  const out: Verdict[] = [];
  const w = results.writer;
  if (w) {
    const v = verdict({ id: 'writer.ratio', part: 'writer overhead', what: `business TPS with outbox row / without (Avro, concurrency ${w.concurrency})`, value: w.ratio, unit: 'x', target: TARGETS.writerRatio });
    if (v.pass === false) {
      const [only, withRow] = w.runs;
      v.why =
        `the outbox INSERT is one more statement round trip in a one-row transaction: ${only?.tps} vs ${withRow?.tps} tx/s; ` +
        `in the business statement (prepareInsert) the ratio is ${w.ratioSameStatement}; ${cpuNote(w.load, 'writers')}`;
    }
    out.push(v);
    out.push(verdict({ id: 'writer.ratioSameStatement', part: 'writer overhead', what: 'same, outbox row in the business statement (prepareInsert)', value: w.ratioSameStatement, unit: 'x', target: TARGETS.writerRatio }));
    out.push(verdict({ id: 'writer.ratioDeleteAfterInsert', part: 'writer overhead', what: 'same, insert-then-delete (CDC only)', value: w.ratioDeleteAfterInsert, unit: 'x' }));
    if (out[out.length - 2]?.pass === false) (out[out.length - 2] as Verdict).why = `one statement still carries the extra row's encoding and WAL; ${cpuNote(w.load, 'writers')}`;
  }
  out.push(...idleVerdicts(results));
  for (const [key, run, label] of pipelineRuns(results)) out.push(...pipelineVerdicts(key, label, run));
  out.push(...handlerFormVerdicts(results));
  if (results.raw) out.push(verdict({ id: 'raw.eventsPerSecond', part: 'raw Kafka', what: 'kafkajs produce (acks=all) -> consume, same records', value: results.raw.eventsPerSecond, unit: 'events/s' }));
  if (results.router) out.push(...routerVerdicts(results.router));
  const wd = results.watchdog;
  if (wd) {
    const poll = verdict({ id: 'watchdog.pollMs', part: 'watchdog', what: `database time per poll, p95, ${wd.slots} slots (EXPLAIN ANALYZE)`, value: wd.serverMs.p95, unit: 'ms', target: TARGETS.watchdogPollMs });
    if (poll.pass === false) poll.why = `server time p50 ${wd.serverMs.p50} / p95 ${wd.serverMs.p95} / max ${wd.serverMs.max} ms over ${wd.polls} polls; round trip p95 ${wd.roundTripMs.p95} ms; ${cpuNote(wd.load, 'watchdog')}`;
    out.push(poll);
    out.push(verdict({ id: 'watchdog.roundTripMs', part: 'watchdog', what: 'client round trip per poll, p95', value: wd.roundTripMs.p95, unit: 'ms' }));
    const worst = wd.detectionIntervals.length ? Math.max(...wd.detectionIntervals) : Number.NaN;
    const detect = verdict({ id: 'watchdog.detectionIntervals', part: 'watchdog', what: `alert after a breach, worst of ${wd.detectionIntervals.length} (poll ${wd.intervalMs} ms)`, value: worst, unit: 'intervals', target: TARGETS.watchdogDetectionIntervals });
    if (detect.pass === false) detect.why = `delays in poll intervals: ${wd.detectionIntervals.join(', ')}; ${cpuNote(wd.load, 'watchdog')}`;
    out.push(detect);
  }
  if (results.stackMemory) {
    const m = results.stackMemory;
    const mem = verdict({ id: 'stack.memoryMb', part: 'memory', what: 'stack processes (Postgres, Kafka, Connect, registry), PSS', value: m.totalMb, unit: 'MB', target: TARGETS.stackMemoryMb });
    if (mem.pass === false) mem.why = `PSS by process: ${Object.entries(m.byGroup).map(([k, v]) => `${k} ${v} MB`).join(', ')}`;
    out.push(mem);
  }
  return out;
}

function routerVerdicts(r: RouterThroughputRun): Verdict[] {
  const part = 'router vs raw consume';
  const role = 'progress polling only; the router is its own process';
  const out: Verdict[] = [];
  const ratio = verdict({ id: 'router.ratio', part, what: `router CLI per-event handler / raw kafkajs consume (${r.events} records)`, value: r.ratio, unit: 'x', target: TARGETS.routerRatio });
  if (ratio.pass === false) {
    ratio.why =
      `router ${r.perEvent.eventsPerSecond} vs raw ${r.rawConsume.eventsPerSecond} events/s: each record is decoded and applied in an inbox transaction ` +
      `(inbox row + handler row, up to ${r.maxTransactionRecords} records per transaction, ${r.lanes} lane(s)) while raw consume does nothing; ${cpuNote(r.perEvent.load, role, r.perEvent.cpuUsPerEvent)}`;
  }
  out.push(ratio);
  out.push(verdict({ id: 'router.perEvent', part, what: 'router CLI drain, per-event handler (one-row effect)', value: r.perEvent.eventsPerSecond, unit: 'events/s' }));
  const batch = verdict({ id: 'router.batch', part, what: 'router CLI drain, batch handler (one INSERT per chunk)', value: r.batch.supported ? r.batch.eventsPerSecond : Number.NaN, unit: 'events/s', target: TARGETS.routerBatchDrain });
  if (batch.pass === false) {
    batch.why = r.batch.supported
      ? `per-event ${r.perEvent.eventsPerSecond} events/s beside it; ${cpuNote(r.batch.load, role, r.batch.cpuUsPerEvent)}`
      : (r.batch.reason ?? 'not supported by this router');
  }
  out.push(batch);
  out.push(verdict({ id: 'router.rawConsume', part, what: 'raw kafkajs consume of the same topic', value: r.rawConsume.eventsPerSecond, unit: 'events/s' }));
  const rssMax = Math.max(r.perEvent.rssMaxMb, r.batch.rssMaxMb);
  const rss = verdict({ id: 'router.rssMaxMb', part, what: 'router RSS at full rate (max of both drains)', value: rssMax, unit: 'MB', target: TARGETS.routerRssMb });
  if (rss.pass === false) rss.why = `peak RSS ${rssMax} MB sampled from /proc while it drained ${r.events} records`;
  out.push(rss);
  return out;
}

const fmtLoop = (l: EventLoopDelay | undefined) => (l ? `${l.p99}` : 'n/a');

/** Every curve measured, with its verdict key (`cdc`, `cdc.batch`, `relay`, `relay.batch`) and label. Pure. */
export function pipelineRuns(results: BenchResults): Array<[string, PipelineRun, string]> {
  const runs: Array<[string, PipelineRun | undefined, string]> = [
    ['cdc', results.cdc, 'CDC (Debezium), per-event handler'],
    ['cdc.batch', results.cdcBatch, 'CDC (Debezium), batch handler'],
    ['relay', results.relay, 'polling relay, per-event handler'],
    ['relay.batch', results.relayBatch, 'polling relay, batch handler'],
  ];
  return runs.filter((r): r is [string, PipelineRun, string] => r[1] !== undefined);
}

/** The pipeline's CPU at 0 and at 200 events/s (% of one core) against the idle-cost targets. */
function idleVerdicts(results: BenchResults): Verdict[] {
  const out: Verdict[] = [];
  for (const pipeline of ['cdc', 'relay'] as const) {
    const idle = results.idle?.[pipeline];
    if (idle) {
      const v = verdict({ id: `${pipeline}.idleCpu`, part: 'idle cost', what: `${pipeline === 'cdc' ? 'CDC' : 'relay'} pipeline at 0 events/s (stack, router, watchdog${pipeline === 'relay' ? ', relay' : ''}), % of one core`, value: idle.pipelinePct, unit: '%', target: TARGETS.idleCpuPct });
      if (v.pass === false) v.why = `by process over ${idle.load.seconds} s: ${byProcess(idle.load.cpuPct)}`;
      out.push(v);
    }
    const run = pipeline === 'cdc' ? results.cdc : results.relay;
    const at200 = run?.steps.find((s) => s.rate === 200);
    if (at200) {
      const pct = pipelinePct(at200.load.cpuPct);
      const v = verdict({ id: `${pipeline}.cpu200Pct`, part: 'idle cost', what: `${pipeline === 'cdc' ? 'CDC' : 'relay'} pipeline at 200 events/s, per-event handler (the writer process left out), % of one core`, value: pct, unit: '%', target: TARGETS.cpuAt200Pct });
      if (v.pass === false) v.why = `by process: ${byProcess(at200.load.cpuPct)}`;
      out.push(v);
    }
  }
  return out;
}

/** The per-event form against the batch form of the same pipeline: sustained rate within 20 %. */
function handlerFormVerdicts(results: BenchResults): Verdict[] {
  const out: Verdict[] = [];
  for (const [key, perEvent, batch] of [['cdc', results.cdc, results.cdcBatch], ['relay', results.relay, results.relayBatch]] as const) {
    if (!perEvent?.sustainedMax) continue;
    out.push(verdict({ id: `${key}.perEvent.sustained`, part: 'per-event handlers', what: `${key === 'cdc' ? 'CDC' : 'relay'}: sustained maximum with per-event handlers`, value: perEvent.sustainedMax.rate, unit: 'events/s', target: TARGETS.perEventSustained }));
    if (!batch?.sustainedMax) continue;
    const ratio = round(perEvent.sustainedMax.rate / batch.sustainedMax.rate, 2);
    const v = verdict({ id: `${key}.perEvent.ratio`, part: 'per-event handlers', what: `${key === 'cdc' ? 'CDC' : 'relay'}: sustained per-event / batch (${perEvent.sustainedMax.rate} / ${batch.sustainedMax.rate})`, value: ratio, unit: 'x', target: TARGETS.perEventRatio });
    out.push(v);
  }
  return out;
}

function pipelinePct(cpuPct: Record<string, number>): number {
  return round(Object.entries(cpuPct).reduce((sum, [group, pct]) => sum + (!inPipelineAtRest(group) ? 0 : pct), 0));
}

function byProcess(cpuPct: Record<string, number>): string {
  return Object.entries(cpuPct)
    .filter(([group, pct]) => inPipelineAtRest(group) && pct >= 0.1)
    .sort((a, b) => b[1] - a[1])
    .map(([group, pct]) => `${LABELS[group] ?? group} ${pct}%`)
    .join(', ');
}

function pipelineVerdicts(key: string, label: string, run: PipelineRun): Verdict[] {
  const out: Verdict[] = [];
  const part = `${label} end to end`;
  const byRate = new Map(run.steps.map((s) => [s.rate, s]));
  const targets = LATENCY_TARGETS.filter((t) => t.pipeline === run.pipeline && (t.handler === undefined || t.handler === run.handler));
  const rates = [...new Set([...run.steps.map((s) => s.rate), ...targets.map((t) => t.rate)])].sort((a, b) => a - b);
  for (const rate of rates) {
    const s = byRate.get(rate);
    const t = targets.find((x) => x.rate === rate);
    if (!s) {
      // A targeted rate the curve never reached: past the knee below it.
      if (t && run.steps.some((x) => x.rate < rate && !x.keptUp)) out.push(verdict({ id: `${key}.latency${rate}.p99`, part, what: `@${rate}/s commit -> handled p99`, value: Number.NaN, unit: 'ms', target: { comparator: '<=', value: t.p99 }, why: notMeasuredWhy(run, rate) } as Omit<Verdict, 'pass'>));
      continue;
    }
    out.push(...stepVerdicts(key, part, s, t));
  }
  const max = run.sustainedMax;
  const at = max ? byRate.get(max.rate) : undefined;
  const flat = Boolean(at && !at.backlogGrew && at.commitToHandledMs.p99 <= SUSTAINED_P99_MS);
  const t = verdict({
    id: `${key}.sustained`,
    part,
    what: `sustained maximum: highest rate kept up (flat backlog, all handled, p99 ≤ 1 s)${max?.lowerBound ? '; a lower bound: nothing above it failed' : ''}`,
    value: max?.rate ?? 0,
    unit: 'events/s',
    target: TARGETS.throughput,
  });
  if (t.pass === false) t.why = sustainedWhy(run);
  out.push(t);
  const held = byRate.get(TARGETS.throughput.value);
  if (held) {
    const v = verdict({ id: `${key}.sustained.p99`, part, what: `@${held.rate}/s: backlog flat and p99 ≤ ${SUSTAINED_P99_MS} ms`, value: flat && max && max.rate >= held.rate ? 1 : 0, unit: `(p99 ${held.commitToHandledMs.p99} ms, backlog ${held.backlogMid} -> ${held.backlogEnd})`, target: { comparator: '>=', value: 1, text: 'yes' } });
    if (v.pass === false) v.why = sustainedWhy(run);
    out.push(v);
  }
  return out;
}

function stepVerdicts(key: string, part: string, s: StepRun, t: (typeof LATENCY_TARGETS)[number] | undefined): Verdict[] {
  const out: Verdict[] = [];
  const r = s.rate;
  const unreached = s.reached ? '' : ` (writer reached only ${s.reachedPerSec}/s: not reported)`;
  const value = (v: number) => (s.reached ? v : Number.NaN);
  const p50 = verdict({ id: `${key}.latency${r}.p50`, part, what: `@${r}/s commit -> handled p50 (DB clock)${unreached}`, value: value(s.commitToHandledMs.p50), unit: 'ms', ...(t?.p50 !== undefined ? { target: { comparator: '<=', value: t.p50 } } : {}) });
  const p99 = verdict({ id: `${key}.latency${r}.p99`, part, what: `@${r}/s commit -> handled p99 (DB clock)${unreached}`, value: value(s.commitToHandledMs.p99), unit: 'ms', ...(t ? { target: { comparator: '<=', value: t.p99 } } : {}) });
  for (const v of [p50, p99]) if (v.pass === false) v.why = latencyWhy(key, s, v.id.endsWith('p50') ? 'p50' : 'p99');
  out.push(p50, p99);
  out.push(verdict({ id: `${key}.latency${r}.split`, part, what: `@${r}/s p99 split: commit -> Kafka (broker time) | Kafka -> handled`, value: s.commitToKafkaMs.p99, unit: `ms | ${s.kafkaToHandledMs.p99} ms` }));
  out.push(verdict({ id: `${key}.latency${r}.handled`, part, what: `@${r}/s reached rate; handled of committed; backlog mid -> end`, value: s.reachedPerSec, unit: `/s; ${s.handled} of ${s.committed}; ${s.backlogMid} -> ${s.backlogEnd}${s.keptUp ? '' : ' (past the knee)'}` }));
  const loops = s.eventLoopMs;
  out.push(verdict({ id: `${key}.latency${r}.eventLoop`, part, what: `@${r}/s event-loop delay p99, router | writer${key.startsWith('relay') ? ' | relay' : ''}`, value: loops.router?.p99 ?? Number.NaN, unit: `ms | ${fmtLoop(loops.writer)}${key.startsWith('relay') ? ` | ${fmtLoop(loops.relay)}` : ''} ms` }));
  out.push(verdict({ id: `${key}.cpu${r}`, part, what: `@${r}/s CPU per event handled, the pipeline's processes (by process: the CPU table)`, value: pipelineCpuPerEvent(s.cpuUsPerEvent), unit: 'µs' }));
  return out;
}

function notMeasuredWhy(run: PipelineRun, rate: number): string {
  const below = run.steps.filter((s) => s.rate < rate && !s.keptUp).sort((a, b) => a.rate - b.rate)[0];
  if (!below) return `not measured: ${rate}/s was not in --rates`;
  return `not measured: the pipeline was already past the knee at ${below.rate}/s (${stepState(below)})`;
}

function stepState(s: StepRun): string {
  const bits: string[] = [];
  if (!s.reached) bits.push(`the writer reached only ${s.reachedPerSec}/s`);
  if (s.backlogGrew) bits.push(`the backlog grew ${s.backlogMid} -> ${s.backlogEnd}`);
  if (s.missing > 0) bits.push(`${s.missing} events not handled within 60 s`);
  bits.push(`p99 ${s.commitToHandledMs.p99} ms`);
  if (s.writerError) bits.push(s.writerError);
  return bits.join(', ');
}

function sustainedWhy(run: PipelineRun): string {
  const key = run.pipeline;
  const failed = run.steps.filter((s) => !s.keptUp).sort((a, b) => a.rate - b.rate)[0];
  if (!failed) return `every rate measured kept up; the search stopped at ${Math.max(0, ...run.steps.map((s) => s.rate))}/s (--rates / --probes)`;
  const where = Number.isFinite(failed.commitToKafkaMs.p99)
    ? `; its p99 split: commit -> Kafka ${failed.commitToKafkaMs.p99} ms (${key === 'cdc' ? 'Debezium + Connect' : 'relay'}) | Kafka -> handled ${failed.kafkaToHandledMs.p99} ms (router)`
    : '';
  return `first rate past the knee: ${failed.rate}/s (${stepState(failed)})${where}; ${cpuNote(failed.load, 'measuring only', failed.cpuUsPerEvent)}`;
}

function latencyWhy(key: string, s: StepRun, p: 'p50' | 'p99'): string {
  const source = key.startsWith('cdc') ? 'Debezium poll + Connect producer' : 'relay poll interval + claim transaction';
  const parts = [
    `${p} ${s.commitToHandledMs[p]} ms splits into commit -> Kafka ${s.commitToKafkaMs[p]} ms (${source}) and Kafka -> handled ${s.kafkaToHandledMs[p]} ms (router fetch + inbox transaction)`,
  ];
  if (!s.reached) parts.push(`the writer reached only ${s.reachedPerSec} of ${s.rate} events/s${s.writerError ? ` (${s.writerError})` : ''}`);
  if (s.backlogGrew) parts.push(`the backlog grew ${s.backlogMid} -> ${s.backlogEnd}`);
  if (s.missing > 0) parts.push(`${s.missing} events were not handled within 60 s`);
  if (s.eventLoopMs.router) parts.push(`router event-loop delay p99 ${s.eventLoopMs.router.p99} ms`);
  parts.push(cpuNote(s.load, 'measuring only', s.cpuUsPerEvent));
  return parts.join('; ');
}
