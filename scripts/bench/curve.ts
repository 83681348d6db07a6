/**
 * The latency-versus-rate curve: which rate to measure next, and where the knee is. Pure, so the search
 * is unit-tested. A step "kept up" when the writer reached the rate, the backlog stayed flat, every
 * event was handled after the run, and p99 stayed under a second; the sustained maximum is the highest
 * rate that kept up. The listed rates are measured in order until one does not keep up (the rest are
 * past the knee and skipped); then the knee is narrowed between the last good and the first bad rate,
 * or, when every listed rate kept up, looked for above them (× 1.5 per probe).
 */

/** Below this share of the asked rate, the writer did not reach it and the latency is not reported at it. */
export const REACHED_SHARE = 0.95;
/** p99 above this (ms): past the knee. */
export const KNEE_P99_MS = 1000;

export interface StepOutcome {
  rate: number;
  reachedPerSec: number;
  missing: number;
  backlogGrew: boolean;
  p99: number;
}

export function reached(step: Pick<StepOutcome, 'rate' | 'reachedPerSec'>): boolean {
  return step.reachedPerSec >= REACHED_SHARE * step.rate;
}

export function keptUp(step: StepOutcome): boolean {
  return reached(step) && !step.backlogGrew && step.missing === 0 && Number.isFinite(step.p99) && step.p99 <= KNEE_P99_MS;
}

/**
 * Backlog (committed − handled) at the middle and at the end of the writing: it grew when it rose by
 * more than a tenth of what was written in between (and more than 100 events). Pure.
 */
export function backlogGrew(mid: number, end: number, writtenBetween: number): boolean {
  return end - mid > Math.max(100, 0.1 * writtenBetween);
}

const roundRate = (r: number) => (r >= 1000 ? Math.round(r / 100) * 100 : Math.round(r / 10) * 10);

/** The next rate to measure, or undefined when the curve is done. `probes`: extra rates allowed beyond the list. */
export function nextRate(listed: readonly number[], done: readonly StepOutcome[], probes: number): { rate: number; kind: 'listed' | 'probe' } | undefined {
  const measured = new Set(done.map((s) => s.rate));
  const extra = done.filter((s) => !listed.includes(s.rate)).length;
  const bad = done.filter((s) => !keptUp(s)).map((s) => s.rate);
  if (bad.length === 0) {
    const next = listed.find((r) => !measured.has(r));
    if (next !== undefined) return { rate: next, kind: 'listed' };
    const top = Math.max(0, ...done.map((s) => s.rate));
    return top > 0 && extra < probes ? { rate: roundRate(top * 1.5), kind: 'probe' } : undefined;
  }
  const firstBad = Math.min(...bad);
  const good = done.filter((s) => keptUp(s) && s.rate < firstBad).map((s) => s.rate);
  // Listed rates below the first bad one that are still to do (the list is not necessarily sorted).
  const pending = listed.find((r) => !measured.has(r) && r < firstBad);
  if (pending !== undefined) return { rate: pending, kind: 'listed' };
  if (good.length === 0 || extra >= probes) return undefined;
  const lastGood = Math.max(...good);
  const mid = roundRate(Math.sqrt(lastGood * firstBad));
  if (firstBad / lastGood < 1.3 || mid <= lastGood || mid >= firstBad || measured.has(mid)) return undefined;
  return { rate: mid, kind: 'probe' };
}

/** The listed rates never measured because a lower one was already past the knee. */
export function skippedRates(listed: readonly number[], done: readonly StepOutcome[]): number[] {
  const measured = new Set(done.map((s) => s.rate));
  return listed.filter((r) => !measured.has(r));
}

/**
 * The highest rate that kept up, and whether it is only a lower bound (nothing above it failed: the
 * search stopped before the pipeline did).
 */
export function sustainedMax(done: readonly StepOutcome[]): { rate: number; lowerBound: boolean } | undefined {
  const good = done.filter(keptUp).map((s) => s.rate);
  if (good.length === 0) return undefined;
  const rate = Math.max(...good);
  return { rate, lowerBound: !done.some((s) => s.rate > rate && !keptUp(s)) };
}
