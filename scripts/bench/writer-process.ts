import { fork, type ChildProcess } from 'node:child_process';
import { DIST } from './dist-paths';
import type { OutboxConfig } from 'outbox-router/config';
import type { EventLoopDelay, WriterMode, WriterReply, WriterRequest } from './writer-protocol';
import type { PacedRun } from './pacing';

export interface WriterProcess {
  pid: number;
  /** Writes `rate` events/s for `seconds` labelled `step`; `onProgress` gets the events committed so far. */
  run(step: string, rate: number, seconds: number, onProgress?: (done: number) => void): Promise<{ run: PacedRun; eventLoopMs: EventLoopDelay }>;
  stop(): Promise<void>;
}

/** Forks the writer child (build/scripts/bench/children/writer.js) and waits until its connections are open. */
export async function startWriterProcess(config: OutboxConfig, mode: WriterMode, connections: number): Promise<WriterProcess> {
  const child: ChildProcess = fork(DIST.writer, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  let listener: ((m: WriterReply) => void) | undefined;
  let exited: Error | undefined;
  const waiters = new Set<(error: Error) => void>();
  child.on('message', (m: WriterReply) => listener?.(m));
  child.once('exit', (code) => {
    exited = new Error(`bench: the writer process exited (code ${code})`);
    for (const w of waiters) w(exited);
  });
  const request = <T>(message: WriterRequest | undefined, onReply: (m: WriterReply, done: (v: T) => void, fail: (e: Error) => void) => void) =>
    new Promise<T>((resolve, reject) => {
      if (exited) return reject(exited);
      const fail = (e: Error) => {
        waiters.delete(fail);
        listener = undefined;
        reject(e);
      };
      waiters.add(fail);
      listener = (m) => {
        if (m.type === 'error') return fail(new Error(`bench writer: ${m.message}`));
        onReply(
          m,
          (v) => {
            waiters.delete(fail);
            listener = undefined;
            resolve(v);
          },
          fail,
        );
      };
      if (message) child.send(message);
    });
  await request<void>({ type: 'init', config, mode, connections }, (m, done) => m.type === 'ready' && done());
  return {
    pid: child.pid as number,
    run: (step, rate, seconds, onProgress) =>
      request({ type: 'run', step, rate, seconds }, (m, done) => {
        if (m.type === 'progress') onProgress?.(m.done);
        if (m.type === 'result') done({ run: m.run, eventLoopMs: m.eventLoopMs });
      }),
    async stop() {
      if (exited) return;
      const gone = new Promise((r) => child.once('exit', r));
      child.send({ type: 'stop' } satisfies WriterRequest);
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await gone;
      clearTimeout(timer);
    },
  };
}
