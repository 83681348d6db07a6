/** The bench's options and results, shared by the orchestrator (run-bench.ts), the report and the verdicts. */
import type { Logger } from 'outbox-router/log';
import type { WatchdogMeasurement } from 'outbox-router/watchdog';
import type { Load } from './load';
import type { HandlerKind, PipelineRun } from './pipeline';
import type { RawKafkaRun } from './raw-kafka';
import type { RouterThroughputRun } from './router-throughput';
import type { Verdict } from './targets';
import type { WriterRun } from './writer-overhead';
import type { WriterMode } from './writer-protocol';

export const PARTS = ['idle', 'writer', 'cdc', 'relay', 'raw', 'router', 'watchdog'] as const;
export type Part = (typeof PARTS)[number];

export interface BenchOptions {
  /** Length of each rate step of the latency curve, s. */
  seconds: number;
  /** Warm-up at the first rate before each pipeline's curve (JIT), s. */
  warmupSeconds: number;
  /** Rates of the latency curve, events/s, in order. */
  rates: number[];
  /** Rates tried beyond the list to find the sustained maximum. */
  probes: number;
  /** Writer-overhead run length (all modes, over 3 rounds), s. */
  writerSeconds: number;
  concurrency: number;
  /** How the writer child writes: plain SQL (default) or createOutboxWriter. */
  writerMode: WriterMode;
  /** Connections of the writer child (events in flight at most). */
  writerConnections: number;
  /** The handler forms the pipelines' router runs, each a curve of its own, in this order. */
  handlers: HandlerKind[];
  /** Length of the idle window of each pipeline, s. */
  idleSeconds: number;
  /** The CDC part's connector with connector.exactlyOnce (KIP-618); the Connect worker needs exactly.once.source.support=enabled. */
  exactlyOnce?: boolean;
  only: Part[];
  output: string;
  log: Logger;
  /** Progress bars (a terminal) or one log line per second. */
  tty?: boolean;
  /** Events pre-filled for the router vs raw consume comparison. */
  routerEvents: number;
}

export interface IdleMeasurement {
  /** CPU per process group over the idle window, % of one core. */
  load: Load;
  /** The sum over the pipeline's groups (everything but other processes on the machine), % of one core. */
  pipelinePct: number;
}

export interface IdleResults {
  seconds: number;
  cdc?: IdleMeasurement;
  relay?: IdleMeasurement;
}

export interface RelaySettings {
  workers: number;
  batchSize: number;
  pollIntervalMs: number;
}

export interface WriterResults {
  concurrency: number;
  runs: WriterRun[];
  ratio: number;
  ratioSameStatement: number;
  ratioDeleteAfterInsert: number;
  target: number;
  load: Load;
}

export interface BenchResults {
  machine: { cpus: number; node: string; when: string; loadavgStart: number[]; loadavgEnd?: number[] };
  options: Omit<BenchOptions, 'log' | 'tty' | 'output'> & { partitions: number };
  writer?: WriterResults;
  /** The pipeline's cost with nothing to do, per process. */
  idle?: IdleResults;
  /** The curves with per-event handlers (the form users write first). */
  cdc?: PipelineRun;
  relay?: PipelineRun & { settings: RelaySettings };
  /** The same curves with the batch handler form. */
  cdcBatch?: PipelineRun;
  relayBatch?: PipelineRun & { settings: RelaySettings };
  raw?: RawKafkaRun & { load: Load };
  router?: RouterThroughputRun;
  watchdog?: WatchdogMeasurement & { load: Load };
  /** PSS of the stack's processes at the end of the run. */
  stackMemory?: { totalMb: number; byGroup: Record<string, number> };
  /** The latency-versus-rate chart (SVG), or why there is none. */
  chart?: { file?: string; note?: string };
  /** Parts that failed, with the error: the rest of the run still reports. */
  errors: Partial<Record<Part, string>>;
  verdicts: Verdict[];
  /** Every target missed, with what the measurement shows about why. */
  missed: Array<{ id: string; what: string; value: number; target: string; why: string }>;
  durationSeconds: number;
}
