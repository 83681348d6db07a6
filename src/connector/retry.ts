import { isOutboxError } from '../errors';

/** Backoff with jitter and a ceiling; retries only what `shouldRetry` accepts (by default: retriable OutboxErrors). */
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

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Half fixed, half random ("equal jitter"): concurrent clients spread out, yet each waits a little. */
export function backoffDelay(attempt: number, options: Pick<RetryOptions, 'initialDelayMs' | 'maxDelayMs'>, random: () => number): number {
  const exponential = Math.min(options.maxDelayMs, options.initialDelayMs * 2 ** (attempt - 1));
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
