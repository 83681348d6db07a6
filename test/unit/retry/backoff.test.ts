import { backoffDelay, sleepUnlessAborted } from '../../../src/retry';

describe('backoffDelay', () => {
  const settings = { initialDelayMs: 100, maxDelayMs: 1_000 };

  it('doubles per attempt, half fixed and half jitter', () => {
    expect([1, 2, 3, 4].map((a) => backoffDelay(a, settings, () => 0))).toEqual([50, 100, 200, 400]);
    expect([1, 2, 3, 4].map((a) => backoffDelay(a, settings, () => 0.999999))).toEqual([100, 200, 400, 800]);
  });

  it('never exceeds the ceiling, even for huge attempt numbers', () => {
    expect(backoffDelay(5, settings, () => 0.999999)).toBe(1_000);
    expect(backoffDelay(10_000, settings, () => 0.999999)).toBe(1_000);
    expect(backoffDelay(10_000, settings, () => 0)).toBe(500);
  });

  it('jitter spreads delays between the half and the whole', () => {
    const delays = Array.from({ length: 200 }, () => backoffDelay(3, settings));
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(200);
    expect(Math.max(...delays)).toBeLessThanOrEqual(400);
    expect(new Set(delays).size).toBeGreaterThan(10);
  });
});

describe('sleepUnlessAborted', () => {
  it('resolves true after a full sleep, false at once when aborted', async () => {
    expect(await sleepUnlessAborted(1, new AbortController().signal)).toBe(true);
    const controller = new AbortController();
    const started = Date.now();
    const pending = sleepUnlessAborted(60_000, controller.signal);
    controller.abort();
    expect(await pending).toBe(false);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(await sleepUnlessAborted(60_000, controller.signal)).toBe(false);
  });
});
