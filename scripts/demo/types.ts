/** The demo's options and summary, shared by the orchestrator (run-demo.ts), its command and the tests. */
import type { OutboxConfig } from 'outbox-router/config';
import type { Logger } from 'outbox-router/log';

export interface DemoOptions {
  config: OutboxConfig;
  events: number;
  /** Orders per second the writers aim at. */
  rate: number;
  /** Share of transactions rolled back on purpose, 0..1. */
  rollbackShare: number;
  /** Leave the stack running at the end (it is always left running if it was running before). */
  keep: boolean;
  log: Logger;
  /** Progress of the write and handle phases (a progress bar on a terminal, log lines otherwise). */
  progress?: (phase: 'write' | 'handle', done: number, total: number) => void;
  /** Extra parts started after the router and stopped at the end (the watchdog). */
  companions?: Array<{ name: string; start(): Promise<void>; stop(): Promise<void>; summary?(): Record<string, unknown> }>;
  /** Gives up waiting for the last events after this long. */
  drainTimeoutMs?: number;
  /**
   * Seconds of unmeasured orders at `rate` before the measured ones (default 20): the JVMs' JIT, Connect's
   * producer, the router's group and the database's caches warm up on them, so a first run on a cold stack
   * reports the same percentiles as a warm one. 0 skips the warm-up.
   */
  warmupSeconds?: number;
  /** The stack the demo runs on: the plain local stack by default; `demo --profile secure` gives the secure one. */
  stack?: DemoStack;
}

/** What the demo needs of a stack: is it up, start it, stop it. */
export interface DemoStack {
  ready(): Promise<boolean>;
  up(onStep: (detail: string) => void): Promise<void>;
  down(onStep: (detail: string) => void): Promise<void>;
}

export interface DemoSummary {
  consumer: string;
  committed: number;
  rolledBack: number;
  handled: number;
  handledTwice: number;
  notHandled: number;
  rolledBackSeen: number;
  duplicatesSkipped: number;
  deadLettered: number;
  commitToHandledMs: Record<string, number>;
  /**
   * Before the measured window: the stack (started or found running), then stack up → pipeline ready
   * (database provisioned, schemas registered, connector streaming, router joined), then the warm-up.
   * Warm-up events are not in any count or percentile above.
   */
  coldStart: { stackSeconds: number; readySeconds: number; warmupSeconds: number; warmupEvents: number; warmupHandled: number };
  slot: { name: string; active: boolean | null; lagBytes: number | null; walStatus: string | null };
  companions: Record<string, Record<string, unknown>>;
  seconds: number;
  ok: boolean;
}
