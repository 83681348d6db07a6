/** Messages between the bench and its writer child (scripts/bench/children/writer.ts), over the IPC channel. */
import type { OutboxConfig } from 'outbox-router/config';
import type { PacedRun } from './pacing';

export type WriterMode = 'sql' | 'writer';

export type WriterRequest =
  | { type: 'init'; config: OutboxConfig; mode: WriterMode; connections: number }
  /** Write `rate` events/s for `seconds`, each labelled `step` (stored with the event). */
  | { type: 'run'; step: string; rate: number; seconds: number }
  | { type: 'stop' };

export interface EventLoopDelay {
  p50: number;
  p99: number;
  max: number;
}

export type WriterReply =
  | { type: 'ready'; pid: number }
  | { type: 'progress'; step: string; done: number }
  | { type: 'result'; step: string; run: PacedRun; eventLoopMs: EventLoopDelay }
  | { type: 'error'; message: string };
