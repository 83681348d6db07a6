import { percentiles, round } from '../../../scripts/bench/stats';

describe('percentiles (nearest rank)', () => {
  it('picks the nearest-rank value and does not modify its input', () => {
    const values = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
    expect(percentiles(values)).toEqual({ p50: 5, p95: 10, p99: 10 });
    expect(values[0]).toBe(5);
  });

  it('p99 of 1..1000 is 990, p50 is 500', () => {
    const values = Array.from({ length: 1000 }, (_, i) => i + 1);
    expect(percentiles(values, [50, 99, 100])).toEqual({ p50: 500, p99: 990, p100: 1000 });
  });

  it('an empty input gives NaN, not a made-up 0', () => {
    const p = percentiles([]);
    expect(Number.isNaN(p.p50)).toBe(true);
    expect(Number.isNaN(p.p99)).toBe(true);
  });

  it('a single value is every percentile', () => {
    expect(percentiles([42])).toEqual({ p50: 42, p95: 42, p99: 42 });
  });
});

describe('round', () => {
  it('rounds to the given digits', () => {
    expect(round(1.26)).toBe(1.3);
    expect(round(1.23456, 3)).toBe(1.235);
    expect(round(1234.5, 0)).toBe(1235);
  });
});
