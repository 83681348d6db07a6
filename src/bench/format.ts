import Table from 'cli-table3';
import type { BenchResults } from './run-bench';
import type { Verdict } from './targets';

/** A figure as printed: thousands grouped, NaN (not measured) as "n/a". */
export function formatValue(value: number): string {
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

export function formatBench(results: BenchResults): string {
  const lines = [formatVerdicts(results.verdicts)];
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
