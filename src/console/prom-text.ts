/**
 * The little of the Prometheus text format the console reads: one histogram's cumulative buckets
 * (summed over every label set but `le`), from a service's /metrics. Enough for the commit → handled
 * latency chart; anything it does not understand is skipped.
 */

export interface Histogram {
  /** Upper bounds in seconds, ascending; the last is +Inf. */
  bounds: number[];
  /** Cumulative counts per bound. */
  counts: number[];
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/;

export function parseHistogram(text: string, name: string): Histogram | undefined {
  const byBound = new Map<number, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = SAMPLE.exec(line);
    if (!m || m[1] !== `${name}_bucket`) continue;
    const le = /(?:^|[{,])le="([^"]+)"/.exec(m[2] ?? '')?.[1];
    if (le === undefined) continue;
    const bound = le === '+Inf' ? Infinity : Number(le);
    const value = Number(m[3]);
    if (Number.isNaN(bound) || !Number.isFinite(value)) continue;
    byBound.set(bound, (byBound.get(bound) ?? 0) + value);
  }
  if (byBound.size === 0) return undefined;
  const bounds = [...byBound.keys()].sort((a, b) => a - b);
  return { bounds, counts: bounds.map((b) => byBound.get(b) as number) };
}

/**
 * The q-quantile of what was observed between two scrapes (the difference of their cumulative buckets),
 * interpolated linearly inside its bucket as Prometheus's histogram_quantile does; undefined when nothing
 * was observed, or the counter went back (the service restarted). A quantile in the +Inf bucket is the
 * largest finite bound.
 */
export function quantileBetween(before: Histogram | undefined, after: Histogram, q: number): number | undefined {
  const counts = after.counts.map((c, i) => c - (before && before.bounds[i] === after.bounds[i] ? (before.counts[i] ?? 0) : 0));
  if (before && (before.bounds.length !== after.bounds.length || counts.some((c) => c < 0))) return undefined;
  const total = counts[counts.length - 1] ?? 0;
  if (total <= 0) return undefined;
  const rank = q * total;
  for (let i = 0; i < counts.length; i++) {
    if ((counts[i] as number) >= rank) {
      const upper = after.bounds[i] as number;
      const lower = i === 0 ? 0 : (after.bounds[i - 1] as number);
      if (!Number.isFinite(upper)) return lower;
      const below = i === 0 ? 0 : (counts[i - 1] as number);
      const inBucket = (counts[i] as number) - below;
      return inBucket > 0 ? lower + ((upper - lower) * (rank - below)) / inBucket : upper;
    }
  }
  return undefined;
}
