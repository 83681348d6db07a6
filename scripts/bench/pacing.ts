/**
 * A fixed-rate schedule for the writer child: event i (from 0) is due at i × 1000 / rate ms after the
 * start. A timer wakes the pacer at the next due instant (never a busy loop); each wake starts every
 * event already due, up to `concurrency` in flight. A machine that cannot commit `rate` falls behind:
 * the pacer never sends a burst larger than the connections it has, and the reached rate says so.
 */

/** Events due by `elapsedMs` (event 0 is due at 0), at most `total`. Pure. */
export function dueBy(elapsedMs: number, rate: number, total: number): number {
  if (elapsedMs < 0) return 0;
  return Math.min(total, Math.floor((elapsedMs * rate) / 1000) + 1);
}

/** When event `index` is due, in ms after the start. Pure. */
export function dueAt(index: number, rate: number): number {
  return (index * 1000) / rate;
}

export interface PacedRun {
  /** Events asked: rate × seconds. */
  total: number;
  started: number;
  done: number;
  failed: number;
  /** Start to the last completion, in seconds. */
  seconds: number;
  firstError?: string;
}

export interface PaceOptions {
  rate: number;
  seconds: number;
  concurrency: number;
  /** One event: resolves once committed. */
  send: () => Promise<void>;
  /** Every completed event (progress). */
  onDone?: (done: number) => void;
  now?: () => number;
}

/** Runs the schedule to the end; resolves when every started event has completed or failed. */
export function pace(options: PaceOptions): Promise<PacedRun> {
  const now = options.now ?? (() => performance.now());
  const total = Math.max(0, Math.round(options.rate * options.seconds));
  const run: PacedRun = { total, started: 0, done: 0, failed: 0, seconds: 0 };
  const t0 = now();
  let inFlight = 0;
  let timer: NodeJS.Timeout | undefined;
  return new Promise((resolve) => {
    const finish = () => {
      run.seconds = (now() - t0) / 1000;
      resolve(run);
    };
    const complete = (failed: boolean, error?: unknown) => {
      inFlight--;
      if (!failed) run.done++;
      else {
        run.failed++;
        run.firstError ??= (error as Error)?.message ?? String(error);
      }
      options.onDone?.(run.done);
      if (run.started >= total && inFlight === 0) finish();
      else tick();
    };
    const tick = () => {
      if (timer) {
        clearTimeout(timer);
        timer = undefined;
      }
      const due = dueBy(now() - t0, options.rate, total);
      while (run.started < due && inFlight < options.concurrency) {
        run.started++;
        inFlight++;
        options.send().then(
          () => complete(false),
          (error: unknown) => complete(true, error),
        );
      }
      if (run.started >= total) {
        if (inFlight === 0) finish();
        return;
      }
      // Behind schedule with every connection busy: the next completion ticks again.
      if (run.started < due) return;
      const wait = Math.max(0, t0 + dueAt(run.started, options.rate) - now());
      timer = setTimeout(tick, wait);
    };
    if (total === 0) finish();
    else tick();
  });
}
