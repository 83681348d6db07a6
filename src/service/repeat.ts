import { performance } from 'node:perf_hooks';
import { sleepUnlessAborted } from '../retry';

/**
 * Runs `body` every `intervalMs` (measured from the start of one run to the next, or after it when it
 * took longer) until the signal aborts; a run that throws goes to onError and the next one comes anyway.
 */
export async function repeatUntilAborted(body: () => Promise<void>, options: { signal: AbortSignal; intervalMs: number | (() => number); onError?: (error: unknown) => void; fromStart?: boolean }): Promise<void> {
  while (!options.signal.aborted) {
    const began = performance.now();
    try {
      await body();
    } catch (error) {
      options.onError?.(error);
    }
    const interval = typeof options.intervalMs === 'function' ? options.intervalMs() : options.intervalMs;
    const rest = options.fromStart ? Math.max(0, interval - (performance.now() - began)) : interval;
    if (!(await sleepUnlessAborted(rest, options.signal))) break;
  }
}
