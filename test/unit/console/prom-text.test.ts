import { parseHistogram, quantileBetween } from '../../../src/console/prom-text';

const scrape = (counts: number[]) =>
  [
    '# HELP outbox_router_commit_to_handled_seconds x',
    '# TYPE outbox_router_commit_to_handled_seconds histogram',
    ...['0.005', '0.01', '0.025', '+Inf'].map((le, i) => `outbox_router_commit_to_handled_seconds_bucket{le="${le}"} ${counts[i]}`),
    `outbox_router_commit_to_handled_seconds_count ${counts[3]}`,
    'outbox_router_transaction_seconds_bucket{le="0.001"} 99',
  ].join('\n');

describe('console: the latency chart from the router\'s histogram', () => {
  it('reads the cumulative buckets of one histogram, summed over label sets', () => {
    const text = `${scrape([1, 2, 3, 4])}\noutbox_router_commit_to_handled_seconds_bucket{topic="b",le="0.005"} 10`;
    expect(parseHistogram(text, 'outbox_router_commit_to_handled_seconds')).toEqual({ bounds: [0.005, 0.01, 0.025, Infinity], counts: [11, 2, 3, 4] });
    expect(parseHistogram('nothing here', 'outbox_router_commit_to_handled_seconds')).toBeUndefined();
  });

  it('quantiles of what was observed between two scrapes, interpolated in the bucket', () => {
    const before = parseHistogram(scrape([10, 10, 10, 10]), 'outbox_router_commit_to_handled_seconds');
    // 100 new observations: 50 ≤ 5 ms, 40 in (5, 10] ms, 10 in (10, 25] ms.
    const after = parseHistogram(scrape([60, 100, 110, 110]), 'outbox_router_commit_to_handled_seconds')!;
    expect(quantileBetween(before, after, 0.5)).toBeCloseTo(0.005);
    expect(quantileBetween(before, after, 0.7)).toBeCloseTo(0.0075);
    expect(quantileBetween(before, after, 0.99)).toBeCloseTo(0.0235);
  });

  it('nothing observed, a restarted router (counts went back) or the +Inf bucket', () => {
    const a = parseHistogram(scrape([5, 5, 5, 5]), 'outbox_router_commit_to_handled_seconds');
    expect(quantileBetween(a, a!, 0.5)).toBeUndefined();
    expect(quantileBetween(a, parseHistogram(scrape([1, 1, 1, 1]), 'outbox_router_commit_to_handled_seconds')!, 0.5)).toBeUndefined();
    expect(quantileBetween(undefined, parseHistogram(scrape([0, 0, 0, 4]), 'outbox_router_commit_to_handled_seconds')!, 0.5)).toBe(0.025);
  });
});
