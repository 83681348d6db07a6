/**
 * The project's one retry helper (shared by every part, never copied): exponential backoff with jitter and a ceiling,
 * retrying only what `shouldRetry` accepts (by default retriable OutboxErrors). The Connect client,
 * the registry connection and the router all use it; tests inject fast settings, `sleep` and `random`.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { isOutboxError } from '../errors';

export interface RetryOptions {
  /** Attempts in all, the first included. */
  attempts: number;
  initialDelayMs: number;
  maxDelayMs: number;
  /** Stop retrying once this much time has passed since the first attempt. */
  ceilingMs: number;
  shouldRetry?: (error: unknown) => boolean;
  onRetry?: (error: unknown, attempt: number, delayMs: number) => void;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  now?: () => number;
}

/** The one sleep (node:timers/promises); with a signal, see sleepUnlessAborted. */
export const sleep = (ms: number): Promise<void> => delay(ms);

export interface BackoffSettings {
  initialDelayMs: number;
  maxDelayMs: number;
}

/**
 * Delay before attempt `attempt + 1` (attempt counts from 1), with "equal jitter": half of the
 * exponential delay is fixed, half random, so concurrent clients (or router replicas retrying the same
 * record) spread out while each still waits a little. `random` returns [0, 1).
 */
export function backoffDelay(attempt: number, settings: BackoffSettings, random: () => number = Math.random): number {
  const exponent = Math.max(0, attempt - 1);
  const exponential = Math.min(settings.maxDelayMs, settings.initialDelayMs * 2 ** Math.min(exponent, 30));
  return Math.round(exponential / 2 + random() * (exponential / 2));
}

export async function retry<T>(fn: (attempt: number) => Promise<T>, options: RetryOptions): Promise<T> {
  const wait = options.sleep ?? sleep;
  const random = options.random ?? Math.random;
  const now = options.now ?? Date.now;
  const shouldRetry = options.shouldRetry ?? ((error: unknown) => isOutboxError(error) && error.retriable);
  const started = now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (error) {
      const delay = backoffDelay(attempt, options, random);
      const outOfTime = now() - started + delay > options.ceilingMs;
      if (attempt >= options.attempts || outOfTime || !shouldRetry(error)) throw error;
      options.onRetry?.(error, attempt, delay);
      await wait(delay);
    }
  }
}

/**
 * Sleeps `ms`, waking early when `signal` aborts. Resolves `true` after a full sleep, `false` when
 * aborted, so a stopping router gives up a retry without dead-lettering the record.
 */
export function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return delay(ms, undefined, { signal }).then(
    () => true,
    (error: unknown) => {
      if ((error as Error)?.name === 'AbortError') return false;
      throw error;
    },
  );
}
