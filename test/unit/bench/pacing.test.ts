import { dueAt, dueBy, pace } from '../../../scripts/bench/pacing';

describe('the fixed-rate schedule', () => {
  it('event i is due at i × 1000 / rate ms; event 0 at once', () => {
    expect(dueAt(0, 200)).toBe(0);
    expect(dueAt(1, 200)).toBe(5);
    expect(dueAt(1000, 5000)).toBe(200);
    expect(dueBy(0, 200, 100)).toBe(1);
    expect(dueBy(4.99, 200, 100)).toBe(1);
    expect(dueBy(5, 200, 100)).toBe(2);
    expect(dueBy(-1, 200, 100)).toBe(0);
    expect(dueBy(1e9, 200, 100)).toBe(100);
  });

  it('pace() starts exactly rate × seconds events on a clock it is given, never more in flight than its connections', async () => {
    let clock = 0;
    let inFlight = 0;
    let maxInFlight = 0;
    const run = await pace({
      rate: 1000,
      seconds: 0.05,
      concurrency: 3,
      now: () => (clock += 1),
      send: async () => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        await new Promise((r) => setImmediate(r));
        inFlight--;
      },
    });
    expect(run).toMatchObject({ total: 50, started: 50, done: 50, failed: 0 });
    expect(maxInFlight).toBeLessThanOrEqual(3);
  });

  it('counts failures and keeps the first error; no events for a zero-length run', async () => {
    let n = 0;
    let clock = 0;
    const run = await pace({ rate: 100, seconds: 0.1, concurrency: 2, now: () => (clock += 50), send: async () => { if (n++ % 2) throw new Error(`boom ${n}`); } });
    expect(run.done + run.failed).toBe(10);
    expect(run.failed).toBe(5);
    expect(run.firstError).toBe('boom 2');
    expect(await pace({ rate: 100, seconds: 0, concurrency: 1, send: async () => {} })).toMatchObject({ total: 0, started: 0 });
  });
});
