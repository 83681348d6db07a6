import type { PipelineRun, RateRun } from './pipeline';
import type { BenchResults } from './run-bench';
import { round } from './stats';
import { cpuNote, TARGETS, verdict, type Verdict } from './targets';

/** The rate the latency target (docs/bench.md) is stated at. */
export const LATENCY_TARGET_RATE = 1000;

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
  for (const [key, run, label] of [
    ['cdc', results.cdc, 'CDC (Debezium)'],
    ['relay', results.relay, 'polling relay'],
  ] as const) {
    if (run) out.push(...pipelineVerdicts(key, label, run, results.raw?.eventsPerSecond));
  }
  if (results.raw) out.push(verdict({ id: 'raw.eventsPerSecond', part: 'raw Kafka', what: 'kafkajs produce (acks=all) -> consume, same records', value: results.raw.eventsPerSecond, unit: 'events/s' }));
  const r = results.router;
  if (r) {
    const ratio = verdict({ id: 'router.ratio', part: 'router vs raw consume', what: `router CLI with inbox / raw kafkajs consume (${r.events} records)`, value: r.ratio, unit: 'x', target: TARGETS.routerRatio });
    if (ratio.pass === false) {
      ratio.why =
        `router ${r.router.eventsPerSecond} vs raw ${r.rawConsume.eventsPerSecond} events/s: each record is decoded and applied in an inbox transaction ` +
        `(inbox row + handler row, up to ${r.router.maxTransactionRecords} records per transaction, ${r.router.lanes} lane(s)) while raw consume does nothing; ${cpuNote(r.load, 'progress polling only; the router is its own process')}`;
    }
    out.push(ratio);
    out.push(verdict({ id: 'router.eventsPerSecond', part: 'router vs raw consume', what: 'router CLI events/s (raw consume beside it)', value: r.router.eventsPerSecond, unit: 'events/s' }));
    out.push(verdict({ id: 'router.rawConsume', part: 'router vs raw consume', what: 'raw kafkajs consume of the same topic', value: r.rawConsume.eventsPerSecond, unit: 'events/s' }));
    const rss = verdict({ id: 'router.rssMaxMb', part: 'router vs raw consume', what: 'router RSS at full rate (max)', value: r.router.rssMaxMb, unit: 'MB', target: TARGETS.routerRssMb });
    if (rss.pass === false) rss.why = `peak RSS ${r.router.rssMaxMb} MB sampled from /proc while it drained ${r.events} records`;
    out.push(rss);
  }
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

function pipelineVerdicts(key: 'cdc' | 'relay', label: string, run: PipelineRun, rawRate: number | undefined): Verdict[] {
  const out: Verdict[] = [];
  const role = key === 'cdc' ? 'writer + router' : 'writer + router + relay';
  const part = `${label} end to end`;
  for (const r of run.fixed) {
    const targeted = r.rate === LATENCY_TARGET_RATE;
    const p50 = verdict({ id: `${key}.latency${r.rate}.p50`, part, what: `@${r.rate}/s commit -> handled p50`, value: r.commitToHandledMs.p50 ?? Number.NaN, unit: 'ms', ...(targeted ? { target: TARGETS.latencyP50 } : {}) });
    const p95 = verdict({ id: `${key}.latency${r.rate}.p95`, part, what: `@${r.rate}/s commit -> handled p95`, value: r.commitToHandledMs.p95 ?? Number.NaN, unit: 'ms' });
    const p99 = verdict({ id: `${key}.latency${r.rate}.p99`, part, what: `@${r.rate}/s commit -> handled p99`, value: r.commitToHandledMs.p99 ?? Number.NaN, unit: 'ms', ...(targeted ? { target: TARGETS.latencyP99 } : {}) });
    for (const v of [p50, p99]) if (v.pass === false) v.why = latencyWhy(key, r, v.id.endsWith('p50') ? 'p50' : 'p99', role);
    out.push(p50, p95, p99);
    out.push(verdict({ id: `${key}.latency${r.rate}.split`, part, what: `@${r.rate}/s p99 split: commit -> Kafka record | Kafka -> handled`, value: r.commitToKafkaMs.p99 ?? Number.NaN, unit: `ms | ${r.kafkaToHandledMs.p99} ms` }));
    out.push(verdict({ id: `${key}.latency${r.rate}.handled`, part, what: `@${r.rate}/s handled of committed (reached ${r.committedPerSec}/s)`, value: r.handled, unit: `of ${r.committed}` }));
    out.push(verdict({ id: `${key}.load${r.rate}.dbXact`, part, what: `@${r.rate}/s DB transactions/s, all clients (writer's own)`, value: r.load.dbXactPerSec ?? Number.NaN, unit: `xact/s (${r.writerXactPerSec})` }));
    if (r.relayStatementsPerSec !== undefined) out.push(verdict({ id: `${key}.load${r.rate}.relayStatements`, part, what: `@${r.rate}/s relay statements/s (stats().queries)`, value: r.relayStatementsPerSec, unit: 'stmt/s' }));
  }
  const s = run.sustained;
  if (s) {
    const t = verdict({ id: `${key}.sustained`, part, what: `sustained handled/s, steady window (${s.writers} writers x ${s.eventsPerTransaction} events/tx)`, value: s.steady.handledPerSec, unit: 'events/s', target: TARGETS.throughput });
    if (t.pass === false) {
      const side = s.steady.backlogGrew
        ? `the pipeline fell behind: writers committed ${s.steady.committedPerSec}/s, backlog grew ${s.steady.backlogStart} -> ${s.steady.backlogEnd}; ` +
          `events of the window waited p50 ${s.steady.commitToKafkaP50Ms} ms commit -> Kafka (${key === 'cdc' ? 'Debezium' : 'relay'}) and ${s.steady.kafkaToHandledP50Ms} ms Kafka -> handled (router)`
        : `the writers were the limit: they committed ${s.steady.committedPerSec}/s and the pipeline kept up (backlog ${s.steady.backlogStart} -> ${s.steady.backlogEnd})`;
      const drain = Number.isFinite(s.overall.drainPerSec) ? `; once the writers stopped, the backlog drained at ${s.overall.drainPerSec}/s (no writers competing for the CPU)` : '';
      t.why = `${side}${drain}; ${cpuNote(s.load, role)}`;
    }
    out.push(t);
    out.push(verdict({ id: `${key}.sustained.committed`, part, what: 'sustained committed/s, same window (backlog start -> end)', value: s.steady.committedPerSec, unit: `events/s (${s.steady.backlogStart} -> ${s.steady.backlogEnd})` }));
    out.push(verdict({ id: `${key}.sustained.overall`, part, what: `first commit -> last handled incl. drain (${s.overall.drainSeconds} s drain)`, value: s.overall.handledPerSec, unit: 'events/s' }));
    out.push(verdict({ id: `${key}.sustained.drain`, part, what: 'backlog drain after the writers stopped', value: s.overall.drainPerSec, unit: 'events/s' }));
    if (rawRate) out.push(verdict({ id: `${key}.sustained.ratioToRaw`, part, what: 'sustained handled/s as a ratio of raw Kafka produce -> consume', value: round(s.steady.handledPerSec / rawRate, 3), unit: 'x' }));
    out.push(verdict({ id: `${key}.sustained.dbXact`, part, what: "sustained DB transactions/s, all clients (writers' own)", value: s.load.dbXactPerSec ?? Number.NaN, unit: `xact/s (${s.writerXactPerSec})` }));
    if (s.relayStatementsPerSec !== undefined) out.push(verdict({ id: `${key}.sustained.relayStatements`, part, what: 'sustained relay statements/s (stats().queries)', value: s.relayStatementsPerSec, unit: 'stmt/s' }));
  }
  return out;
}

function latencyWhy(key: 'cdc' | 'relay', r: RateRun, p: 'p50' | 'p99', role: string): string {
  const source = key === 'cdc' ? 'Debezium poll + Connect producer' : 'relay poll interval + claim transaction';
  const parts = [`${p} splits into commit -> Kafka ${r.commitToKafkaMs[p]} ms (${source}) and Kafka -> handled ${r.kafkaToHandledMs[p]} ms (router fetch + inbox transaction; the router's inbox transactions took p50 ${r.routerTransactionMs?.p50} / p99 ${r.routerTransactionMs?.p99} ms)`];
  if (r.committedPerSec < 0.95 * r.rate) parts.push(`the writer reached only ${r.committedPerSec} of ${r.rate} commits/s`);
  if (r.missing > 0) parts.push(`${r.missing} events were not handled within 30 s`);
  parts.push(cpuNote(r.load, role));
  return parts.join('; ');
}
