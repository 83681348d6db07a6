/** A time series the console keeps in memory for its charts: points older than `keepMs` fall off. */
export interface Point {
  /** Epoch ms. */
  t: number;
  /** null: not known at that sample (the source was unreachable). */
  v: number | null;
}

export interface Series {
  add(t: number, v: number | null): void;
  points(): Point[];
}

export function createSeries(keepMs: number): Series {
  const points: Point[] = [];
  return {
    add(t, v) {
      points.push({ t, v });
      while (points.length > 0 && (points[0] as Point).t < t - keepMs) points.shift();
    },
    points: () => points.slice(),
  };
}
