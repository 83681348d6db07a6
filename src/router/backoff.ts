/**
 * Exponential backoff with "equal jitter": half of the exponential delay is fixed, half random, so
 * replicas retrying the same poison record spread out while each still waits a little.
 */
export interface BackoffSettings {
  initialDelayMs: number;
  maxDelayMs: number;
}

/** Delay before attempt `attempt + 1` (attempt counts from 1). `random` returns [0, 1). */
export function backoffDelay(attempt: number, settings: BackoffSettings, random: () => number = Math.random): number {
  const exponent = Math.max(0, attempt - 1);
  const exponential = Math.min(settings.maxDelayMs, settings.initialDelayMs * 2 ** Math.min(exponent, 30));
  return Math.round(exponential / 2 + random() * (exponential / 2));
}

/**
 * Sleeps `ms`, waking early when `signal` aborts. Resolves `true` after a full sleep, `false` when
 * aborted, so a stopping router gives up a retry without dead-lettering the record.
 */
export function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
