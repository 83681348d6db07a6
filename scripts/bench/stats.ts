/** Percentiles by nearest rank over a copy; empty input gives NaN rather than a made-up 0. */
export function percentiles(values: readonly number[], ps: readonly number[] = [50, 95, 99]): Record<string, number> {
  const sorted = [...values].sort((a, b) => a - b);
  const out: Record<string, number> = {};
  for (const p of ps) {
    out[`p${p}`] = sorted.length === 0 ? Number.NaN : (sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number);
  }
  return out;
}

export function round(value: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
