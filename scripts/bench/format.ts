import Table from 'cli-table3';
import { inPipelineAtRest, pipelineCpuPerEvent } from './load';
import { pipelineRuns } from './verdicts';
import type { BenchResults } from './types';
import type { Verdict } from './targets';

/** A figure as printed: thousands grouped, NaN (not measured) as "n/a". */
export function formatValue(value: number): string {
  // results.json stores an unmeasured NaN as null.
  if (typeof value !== 'number') return 'n/a';
  if (!Number.isFinite(value)) return Number.isNaN(value) ? 'n/a' : value > 0 ? '∞' : '-∞';
  const digits = Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : Math.abs(value) >= 1 ? 2 : 3;
  return value.toLocaleString('en-US', { maximumFractionDigits: digits });
}

export function formatTarget(v: Verdict): string {
  if (!v.target) return '';
  return `${v.target.comparator === '>=' ? '≥' : '≤'} ${formatValue(v.target.value)}`;
}

export function mark(v: Verdict): string {
  if (v.pass === undefined) return '';
  return v.pass ? '✓' : '✗';
}

/** The readable table: every figure beside its target and a ✓/✗, then each missed target and why. */
export function formatVerdicts(verdicts: readonly Verdict[]): string {
  const table = new Table({ head: ['part', 'figure', 'measured', 'target', ''], style: { head: [], border: [], compact: true }, wordWrap: true, colWidths: [24, 62, 26, 10, 3] });
  let last = '';
  for (const v of verdicts) {
    table.push([v.part === last ? '' : v.part, v.what, `${formatValue(v.value)} ${v.unit}`, formatTarget(v), mark(v)]);
    last = v.part;
  }
  return table.toString();
}

/** Process groups in the CPU table, in this order; any other group found goes after them. */
const CPU_ORDER = ['postgres', 'connect', 'kafka', 'registry', 'router', 'relay', 'watchdog', 'writer', 'benchNode', 'java', 'otherNode', 'other'];
const CPU_HEADS: Record<string, string> = { postgres: 'postgres', connect: 'Connect', kafka: 'Kafka', registry: 'registry', router: 'router', relay: 'relay', watchdog: 'watchdog', writer: 'writer', benchNode: 'bench', java: 'java', otherNode: 'other node*', other: 'other*' };

/** Rows of the CPU table: each pipeline step, then each router drain. Pure. */
export function cpuRows(results: BenchResults): Array<{ label: string; perEvent: Record<string, number> }> {
  const rows: Array<{ label: string; perEvent: Record<string, number> }> = [];
  for (const [key, run] of pipelineRuns(results)) for (const s of [...run.steps].sort((a, b) => a.rate - b.rate)) rows.push({ label: `${key} @${s.rate}/s${s.keptUp ? '' : ' (past knee)'}`, perEvent: s.cpuUsPerEvent });
  const r = results.router;
  if (r) for (const d of [r.perEvent, r.batch]) if (d.supported) rows.push({ label: `router drain (${d.handler})`, perEvent: d.cpuUsPerEvent });
  return rows;
}

/** CPU microseconds per event handled, per process group (columns) and measurement (rows). */
export function formatCpuTable(results: BenchResults): string | undefined {
  const rows = cpuRows(results);
  if (rows.length === 0) return undefined;
  const seen = new Set(rows.flatMap((r) => Object.keys(r.perEvent)));
  const groups = [...CPU_ORDER.filter((g) => seen.has(g)), ...[...seen].filter((g) => !CPU_ORDER.includes(g))];
  const table = new Table({ head: ['µs per event', ...groups.map((g) => CPU_HEADS[g] ?? g), 'pipeline'], style: { head: [], border: [], compact: true } });
  for (const r of rows) table.push([r.label, ...groups.map((g) => (r.perEvent[g] === undefined ? '' : formatValue(r.perEvent[g] as number))), formatValue(pipelineCpuPerEvent(r.perEvent))]);
  return table.toString();
}

/**
 * Verdicts the curve table already shows (per-step reference figures without a target): left out of
 * the main table, kept in results.json. Pure.
 */
export function inCurveTable(v: Verdict): boolean {
  return /^(cdc|relay)(\.batch)?\.(latency\d+\.|cpu\d+$)/.test(v.id) && v.target === undefined;
}

/** One row per measured rate of each pipeline: the curve, as numbers. */
export function formatCurve(results: BenchResults): string | undefined {
  const runs = pipelineRuns(results);
  if (runs.length === 0) return undefined;
  const table = new Table({
    head: ['pipeline', 'asked/s', 'reached/s', 'p50 ms', 'p99 ms', 'p99 to Kafka | from', 'backlog mid -> end', 'loop p99 router|writer|relay', 'CPU µs/ev', ''],
    style: { head: [], border: [], compact: true },
  });
  for (const [key, run] of runs) {
    for (const s of [...run.steps].sort((a, b) => a.rate - b.rate)) {
      const l = s.eventLoopMs;
      const loop = [l.router, l.writer, l.relay].map((x) => (x ? formatValue(x.p99) : '-')).join(' | ');
      table.push([
        key, formatValue(s.rate), formatValue(s.reachedPerSec), formatValue(s.commitToHandledMs.p50), formatValue(s.commitToHandledMs.p99),
        `${formatValue(s.commitToKafkaMs.p99)} | ${formatValue(s.kafkaToHandledMs.p99)}`, `${s.backlogMid} -> ${s.backlogEnd}`, loop,
        formatValue(pipelineCpuPerEvent(s.cpuUsPerEvent)), s.keptUp ? 'kept up' : !s.reached ? 'rate not reached' : 'past the knee',
      ]);
    }
  }
  return table.toString();
}

/**
 * The pipeline's CPU by process at rest and at 200 events/s (per-event handlers), in % of one core:
 * what a deployment pays around the clock. Pure.
 */
export function formatIdleTable(results: BenchResults): string | undefined {
  const rows: Array<{ label: string; cpuPct: Record<string, number> }> = [];
  for (const [pipeline, run] of [['cdc', results.cdc], ['relay', results.relay]] as const) {
    const idle = results.idle?.[pipeline];
    if (idle) rows.push({ label: `${pipeline} at 0 events/s`, cpuPct: idle.load.cpuPct });
    const at200 = run?.steps.find((s) => s.rate === 200);
    if (at200) rows.push({ label: `${pipeline} at 200 events/s`, cpuPct: at200.load.cpuPct });
  }
  if (rows.length === 0) return undefined;
  const seen = new Set(rows.flatMap((r) => Object.keys(r.cpuPct)).filter((g) => g !== 'benchNode'));
  const groups = [...CPU_ORDER.filter((g) => seen.has(g)), ...[...seen].filter((g) => !CPU_ORDER.includes(g))];
  const table = new Table({ head: ['% of one core', ...groups.map((g) => CPU_HEADS[g] ?? g), 'pipeline'], style: { head: [], border: [], compact: true } });
  for (const r of rows) {
    const pipeline = Object.entries(r.cpuPct).reduce((sum, [g, v]) => sum + (!inPipelineAtRest(g) ? 0 : v), 0);
    table.push([r.label, ...groups.map((g) => (r.cpuPct[g] === undefined ? '' : formatValue(r.cpuPct[g] as number))), formatValue(Math.round(pipeline * 10) / 10)]);
  }
  return table.toString();
}

export function formatBench(results: BenchResults): string {
  const lines = [formatVerdicts(results.verdicts.filter((v) => !inCurveTable(v)))];
  const idle = formatIdleTable(results);
  if (idle) lines.push('', 'CPU by process at rest and at 200 events/s (per-event handlers; /proc utime+stime over the window):', idle);
  const curve = formatCurve(results);
  if (curve) lines.push('', 'Latency against rate (commit -> handled from the database clock; Kafka split by broker time; every step after the warm-up):', curve);
  const cpu = formatCpuTable(results);
  if (cpu) {
    lines.push('', 'CPU per event handled, by process (/proc utime+stime over each measured window ÷ events handled in it):', cpu);
    lines.push("* not the pipeline: other processes on the machine (the 'pipeline' column leaves them out)");
  }
  const loads = [results.machine.loadavgStart, results.machine.loadavgEnd].filter(Boolean).map((l) => (l as number[]).join(' '));
  lines.push('', `load average at start | end: ${loads.join(' | ')}${results.chart?.file ? `; chart: ${results.chart.file}` : results.chart?.note ? `; ${results.chart.note}` : ''}`);
  const missed = results.verdicts.filter((v) => v.pass === false);
  const met = results.verdicts.filter((v) => v.pass === true).length;
  lines.push('', `targets: ${met} met, ${missed.length} missed (of ${met + missed.length}); run took ${results.durationSeconds} s on ${results.machine.cpus} cores`);
  if (missed.length > 0) {
    lines.push('', 'Missed targets:');
    for (const v of missed) lines.push(`  ✗ ${v.part}: ${v.what} = ${formatValue(v.value)} ${v.unit}, target ${formatTarget(v)}`, `    why: ${v.why ?? 'not explained by the samples taken'}`);
  }
  const errors = Object.entries(results.errors);
  if (errors.length > 0) {
    lines.push('', 'Parts that failed (no figures):');
    for (const [part, message] of errors) lines.push(`  ${part}: ${message}`);
  }
  return lines.join('\n');
}
