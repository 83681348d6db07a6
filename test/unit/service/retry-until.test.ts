import { repeatUntilAborted, retryUntil } from '../../../src/service';

const fast = { initialDelayMs: 1, maxDelayMs: 2 };

describe('retryUntil', () => {
  it('retries a failing call with backoff until it works, reporting each failure', async () => {
    const retries: Array<[string, number]> = [];
    const result = await retryUntil(
      async (attempt) => {
        if (attempt < 3) throw new Error(`down ${attempt}`);
        return 'up';
      },
      { signal: new AbortController().signal, backoff: fast, onRetry: (e, attempt) => void retries.push([(e as Error).message, attempt]) },
    );
    expect(result).toEqual({ done: true, value: 'up' });
    expect(retries).toEqual([['down 1', 1], ['down 2', 2]]);
  });

  it('runs afterWait after each wait, before the next attempt', async () => {
    const seen: string[] = [];
    await retryUntil(
      async (attempt) => {
        seen.push(`attempt ${attempt}`);
        if (attempt < 3) throw new Error('down');
      },
      { signal: new AbortController().signal, backoff: fast, afterWait: async () => void seen.push('heartbeat') },
    );
    expect(seen).toEqual(['attempt 1', 'heartbeat', 'attempt 2', 'heartbeat', 'attempt 3']);
  });

  it('gives up when the signal aborts, even in the middle of a long wait', async () => {
    const controller = new AbortController();
    const started = Date.now();
    const pending = retryUntil(() => Promise.reject(new Error('down')), { signal: controller.signal, backoff: { initialDelayMs: 60_000, maxDelayMs: 60_000 } });
    setTimeout(() => controller.abort(), 20);
    expect(await pending).toEqual({ done: false });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('does not call fn once aborted, and stops when `stopped` says so', async () => {
    const controller = new AbortController();
    controller.abort();
    let calls = 0;
    expect(await retryUntil(async () => void calls++, { signal: controller.signal, backoff: fast })).toEqual({ done: false });
    expect(calls).toBe(0);
    const stopped = await retryUntil(() => Promise.reject(new Error('x')), { signal: new AbortController().signal, backoff: fast, stopped: () => true });
    expect(stopped).toEqual({ done: false });
  });

  it('throws at once a failure that shouldRetry refuses (one that cannot pass by waiting)', async () => {
    let calls = 0;
    const refused = retryUntil(
      async () => {
        calls++;
        throw new Error('MESSAGE_TOO_LARGE');
      },
      { signal: new AbortController().signal, backoff: fast, shouldRetry: (e) => (e as Error).message !== 'MESSAGE_TOO_LARGE' },
    );
    await expect(refused).rejects.toThrow('MESSAGE_TOO_LARGE');
    expect(calls).toBe(1);
  });
});

describe('repeatUntilAborted', () => {
  it('runs the body on the interval, survives a throwing run, and ends on abort', async () => {
    const controller = new AbortController();
    const errors: string[] = [];
    let runs = 0;
    const loop = repeatUntilAborted(
      async () => {
        runs++;
        if (runs === 2) throw new Error('one bad run');
        if (runs === 4) controller.abort();
      },
      { signal: controller.signal, intervalMs: 1, onError: (e) => void errors.push((e as Error).message) },
    );
    await loop;
    expect(runs).toBe(4);
    expect(errors).toEqual(['one bad run']);
  });
});
