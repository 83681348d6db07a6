import { backlogGrew, keptUp, nextRate, skippedRates, sustainedMax, type StepOutcome } from '../../../scripts/bench/curve';

const ok = (rate: number): StepOutcome => ({ rate, reachedPerSec: rate, missing: 0, backlogGrew: false, p99: 50 });
const bad = (rate: number, over: Partial<StepOutcome> = {}): StepOutcome => ({ rate, reachedPerSec: rate, missing: 0, backlogGrew: true, p99: 2500, ...over });
const LIST = [100, 200, 500, 1000, 2000, 5000];

describe('keeping up', () => {
  it('needs the rate reached (95%), a flat backlog, everything handled and p99 ≤ 1 s', () => {
    expect(keptUp(ok(1000))).toBe(true);
    expect(keptUp({ ...ok(1000), reachedPerSec: 940 })).toBe(false);
    expect(keptUp({ ...ok(1000), backlogGrew: true })).toBe(false);
    expect(keptUp({ ...ok(1000), missing: 1 })).toBe(false);
    expect(keptUp({ ...ok(1000), p99: 1001 })).toBe(false);
    expect(keptUp({ ...ok(1000), p99: Number.NaN })).toBe(false);
  });

  it('the backlog grew when it rose by more than a tenth of what was written in between (and 100 events)', () => {
    expect(backlogGrew(50, 140, 7500)).toBe(false);
    expect(backlogGrew(50, 900, 7500)).toBe(true);
    expect(backlogGrew(0, 99, 10)).toBe(false);
  });
});

describe('the knee search', () => {
  it('walks the list in order while every rate keeps up, then probes × 1.5 above it', () => {
    expect(nextRate(LIST, [], 2)).toEqual({ rate: 100, kind: 'listed' });
    expect(nextRate(LIST, [ok(100), ok(200)], 2)).toEqual({ rate: 500, kind: 'listed' });
    const all = LIST.map(ok);
    expect(nextRate(LIST, all, 2)).toEqual({ rate: 7500, kind: 'probe' });
    expect(nextRate(LIST, [...all, ok(7500)], 2)).toEqual({ rate: 11300, kind: 'probe' });
    expect(nextRate(LIST, [...all, ok(7500), ok(11300)], 2)).toBeUndefined();
    expect(nextRate(LIST, all, 0)).toBeUndefined();
  });

  it('stops the list at the first rate past the knee and narrows between the last good and first bad (geometric middle)', () => {
    const done = [ok(100), ok(200), ok(500), ok(1000), bad(2000)];
    expect(nextRate(LIST, done, 2)).toEqual({ rate: 1400, kind: 'probe' });
    expect(nextRate(LIST, [...done, ok(1400)], 2)).toEqual({ rate: 1700, kind: 'probe' });
    expect(nextRate(LIST, [...done, ok(1400), bad(1700)], 2)).toBeUndefined();
    expect(skippedRates(LIST, done)).toEqual([5000]);
  });

  it('gives up narrowing when the two are close, or when nothing kept up', () => {
    expect(nextRate([1000, 1200], [ok(1000), bad(1200)], 2)).toBeUndefined();
    expect(nextRate(LIST, [bad(100, { reachedPerSec: 10 })], 2)).toBeUndefined();
  });

  it('the sustained maximum is the highest rate that kept up; a lower bound when nothing above it failed', () => {
    expect(sustainedMax([ok(100), ok(1000), bad(2000)])).toEqual({ rate: 1000, lowerBound: false });
    expect(sustainedMax([ok(100), ok(1000)])).toEqual({ rate: 1000, lowerBound: true });
    expect(sustainedMax([bad(100)])).toBeUndefined();
  });
});
