/**
 * The project's performance targets (docs/bench.md) and the verdict of each measured figure against them. Pure: no I/O,
 * so the verdicts and their `why` notes are unit-tested.
 */
import { pipelineCpuPerEvent, type Load } from './load';

export type Comparator = '>=' | '<=';

export interface Verdict {
  /** Stable key, e.g. `cdc.latency1000.p99`. */
  id: string;
  /** Table section. */
  part: string;
  what: string;
  value: number;
  unit: string;
  /** Undefined: a figure reported for reference, with no target of its own. */
  target?: { comparator: Comparator; value: number; text?: string };
  /** Undefined when there is no target or the figure could not be measured. */
  pass?: boolean;
  /** For a missed target: what the measurement shows about the cause. */
  why?: string;
}

export const TARGETS = {
  throughput: { comparator: '>=', value: 5000 },
  writerRatio: { comparator: '>=', value: 0.85 },
  routerRatio: { comparator: '>=', value: 0.5 },
  routerBatchDrain: { comparator: '>=', value: 20_000 },
  routerRssMb: { comparator: '<=', value: 200 },
  watchdogPollMs: { comparator: '<=', value: 5 },
  watchdogDetectionIntervals: { comparator: '<=', value: 2 },
  stackMemoryMb: { comparator: '<=', value: 3 * 1024 },
  /** The whole pipeline at 0 events/s, % of one core (issue 24). */
  idleCpuPct: { comparator: '<=', value: 10 },
  /** The whole pipeline at 200 events/s, % of one core. */
  cpuAt200Pct: { comparator: '<=', value: 35 },
  /** Per-event handlers: at least this sustained rate, and within 20 % of the batch form's. */
  perEventSustained: { comparator: '>=', value: 2500 },
  perEventRatio: { comparator: '>=', value: 0.8 },
} as const satisfies Record<string, { comparator: Comparator; value: number }>;

/** Commit → handled targets by pipeline and rate (events/s), in ms; `handler` narrows one to a handler form. */
export const LATENCY_TARGETS: ReadonlyArray<{ pipeline: 'cdc' | 'relay'; handler?: 'per-event' | 'batch'; rate: number; p50?: number; p99: number }> = [
  { pipeline: 'cdc', rate: 200, p50: 10, p99: 30 },
  { pipeline: 'cdc', rate: 1000, p50: 10, p99: 30 },
  { pipeline: 'cdc', rate: 2000, p99: 50 },
  { pipeline: 'cdc', rate: 5000, p99: 100 },
  { pipeline: 'relay', rate: 1000, p50: 15, p99: 50 },
];

/** The sustained rate is held at p99 ≤ this (ms), with a flat backlog. */
export const SUSTAINED_P99_MS = 100;

/** NaN and ±Infinity never pass a target: an unmeasured figure is not a met one. */
export function meets(value: number, target: { comparator: Comparator; value: number }): boolean {
  if (!Number.isFinite(value)) return false;
  return target.comparator === '>=' ? value >= target.value : value <= target.value;
}

export function verdict(v: Omit<Verdict, 'pass'>): Verdict {
  return v.target ? { ...v, pass: meets(v.value, v.target) } : { ...v };
}

export const LABELS: Record<string, string> = {
  benchNode: 'bench node process',
  postgres: 'postgres',
  connect: 'Kafka Connect (Debezium)',
  kafka: 'Kafka broker',
  registry: 'schema registry',
  router: 'router process',
  relay: 'relay process',
  writer: 'writer process',
  otherNode: 'other node processes',
  other: 'other processes',
};

/**
 * One sentence on where the CPU went during a measurement, from /proc samples: the machine's busy share
 * and the processes that used most of it. `benchRole` names what the bench's own node process did.
 */
export function cpuNote(load: Load | undefined, benchRole = 'measuring only', perEvent?: Record<string, number>): string {
  if (!load) return 'no CPU samples';
  const entries = Object.entries(load.cpuPct)
    .filter(([, v]) => v >= 5)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${LABELS[k] ?? k}${k === 'benchNode' ? ` (${benchRole})` : ''} ${Math.round(v)}%`);
  const capacity = load.cores * 100;
  const busy = Math.round(load.machineBusyPct);
  const saturated = load.machineBusyPct >= 0.9 * capacity;
  const nodeBound = (load.cpuPct.benchNode ?? 0) >= 90;
  const parts = [`machine CPU ${busy}% of ${capacity}%${saturated ? ' (saturated)' : ''}`];
  if (entries.length > 0) parts.push(`by process (100% = one core): ${entries.join(', ')}`);
  if (nodeBound) parts.push(`the bench's node process is single-threaded and used a full core: ${benchRole} compete for it`);
  const costs = perEvent ? formatPerEvent(perEvent) : '';
  if (costs) parts.push(`CPU per event: ${costs}`);
  return parts.join('; ');
}

/** `postgres 180 µs, Kafka Connect 95 µs, …`: the groups that cost at least 5 µs per event, biggest first. Pure. */
export function formatPerEvent(perEvent: Record<string, number>): string {
  const entries = Object.entries(perEvent).filter(([, v]) => v >= 5).sort((a, b) => b[1] - a[1]);
  if (entries.length === 0) return '';
  return `${entries.map(([k, v]) => `${LABELS[k] ?? k} ${Math.round(v)} µs`).join(', ')} (the pipeline's processes: ${Math.round(pipelineCpuPerEvent(perEvent))} µs)`;
}
