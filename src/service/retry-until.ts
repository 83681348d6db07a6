import { backoffDelay, sleepUnlessAborted, type BackoffSettings } from '../retry';

export interface RetryUntilOptions {
  /** Ends the retrying: retryUntil then resolves `{ done: false }`. */
  signal: AbortSignal;
  backoff: BackoffSettings;
  /** A failure this refuses is thrown at once (default: every failure is waited out). */
  shouldRetry?: (error: unknown) => boolean;
  /** Called before each wait, with the failure, the attempt that failed (from 1) and the wait. */
  onRetry?: (error: unknown, attempt: number, delayMs: number) => void;
  /** Runs after each full wait, before the next attempt (e.g. a Kafka heartbeat during a long wait). */
  afterWait?: () => Promise<void>;
  /** Also ends the retrying (checked after each wait), e.g. a batch that lost its partition. */
  stopped?: () => boolean;
  random?: () => number;
}

export type RetryUntilResult<T> = { done: true; value: T } | { done: false };

/**
 * Runs `fn` until it succeeds or the signal aborts, waiting with backoff (jittered, doubling to the
 * ceiling) between attempts: for what a service cannot go on without and must not give up on (the
 * database or Kafka coming back). A failure is handed to onRetry and tried again; only one that
 * `shouldRetry` refuses is thrown.
 */
export async function retryUntil<T>(fn: (attempt: number) => Promise<T>, options: RetryUntilOptions): Promise<RetryUntilResult<T>> {
  for (let attempt = 1; !options.signal.aborted; attempt++) {
    try {
      return { done: true, value: await fn(attempt) };
    } catch (error) {
      if (options.shouldRetry && !options.shouldRetry(error)) throw error;
      const delayMs = backoffDelay(attempt, options.backoff, options.random);
      options.onRetry?.(error, attempt, delayMs);
      if (!(await sleepUnlessAborted(delayMs, options.signal)) || options.stopped?.()) break;
      await options.afterWait?.();
    }
  }
  return { done: false };
}
