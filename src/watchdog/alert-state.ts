/**
 * One alert's state machine (per cluster + slot + rule): OK → WARNING → CRITICAL and back, with
 * Prometheus-like semantics. A level fires only after the condition held `holdForMs` (`for`); a firing
 * level de-escalates or resolves only after the condition stayed below it for `clearForMs`
 * (`keep_firing_for`); while firing it is sent again every `repeatIntervalMs`. Raise/clear thresholds
 * (hysteresis on the value) live in the rules; this only sees levels. `undefined` = no verdict (query
 * failed, value unknown): nothing changes, so missing data never resolves an alert.
 */

export type Level = 'ok' | 'warning' | 'critical';
export type Severity = Exclude<Level, 'ok'>;
export type AlertEvent = 'firing' | 'escalated' | 'deescalated' | 'repeat' | 'resolved';

export const LEVEL_RANK: Readonly<Record<Level, number>> = { ok: 0, warning: 1, critical: 2 };

export interface AlertState {
  /** The level being notified; `ok` = not firing. */
  level: Level;
  /** Since when the observed level has continuously been at least warning / critical. */
  atLeastSince: { warning: number | null; critical: number | null };
  /** Since when the observed level has been below the firing level. */
  belowSince: number | null;
  startsAt: number | null;
  lastSentAt: number | null;
  /** Notifications sent for this firing episode (ids stay unique and stable across retries). */
  sequence: number;
}

export interface Timing {
  holdForMs: number;
  clearForMs: number;
  repeatIntervalMs: number;
}

export interface Transition {
  state: AlertState;
  event?: AlertEvent;
  /** The level before the transition (for resolved / de-escalated notifications). */
  previous: Level;
}

export function initialAlertState(): AlertState {
  return { level: 'ok', atLeastSince: { warning: null, critical: null }, belowSince: null, startsAt: null, lastSentAt: null, sequence: 0 };
}

export function step(state: AlertState, observed: Level | undefined, now: number, timing: Timing): Transition {
  const previous = state.level;
  if (observed === undefined) return { state, previous };
  const rank = LEVEL_RANK[observed];
  const atLeastSince = {
    warning: rank >= 1 ? (state.atLeastSince.warning ?? now) : null,
    critical: rank >= 2 ? (state.atLeastSince.critical ?? now) : null,
  };
  const held = (since: number | null) => since !== null && now - since >= timing.holdForMs;
  const eligible: Level = held(atLeastSince.critical) ? 'critical' : held(atLeastSince.warning) ? 'warning' : 'ok';
  const next: AlertState = { ...state, atLeastSince };

  if (LEVEL_RANK[eligible] > LEVEL_RANK[state.level]) {
    const opening = state.level === 'ok';
    return {
      previous,
      event: opening ? 'firing' : 'escalated',
      state: { ...next, level: eligible, belowSince: null, startsAt: opening ? now : state.startsAt, lastSentAt: now, sequence: opening ? 1 : state.sequence + 1 },
    };
  }
  if (rank < LEVEL_RANK[state.level]) {
    const belowSince = state.belowSince ?? now;
    if (now - belowSince >= timing.clearForMs) {
      if (observed === 'ok') {
        return { previous, event: 'resolved', state: { ...next, level: 'ok', belowSince: null, lastSentAt: now, sequence: state.sequence + 1 } };
      }
      return { previous, event: 'deescalated', state: { ...next, level: observed, belowSince: null, lastSentAt: now, sequence: state.sequence + 1 } };
    }
    return { previous, state: { ...next, belowSince } };
  }
  next.belowSince = null;
  if (state.level !== 'ok' && timing.repeatIntervalMs > 0 && state.lastSentAt !== null && now - state.lastSentAt >= timing.repeatIntervalMs) {
    return { previous, event: 'repeat', state: { ...next, lastSentAt: now, sequence: state.sequence + 1 } };
  }
  return { previous, state: next };
}

/**
 * The level of a value against raise thresholds, with hysteresis: once at a level, the value must
 * fall below `clearRatio` × that level's threshold to leave it. `higherIsWorse` false is for time-left
 * values (an ETA), where `clearRatio` > 1. `null` value = no verdict.
 */
export function thresholdLevel(
  value: number | null,
  thresholds: { warning: number; critical: number },
  current: Level,
  clearRatio: number,
  higherIsWorse = true,
): Level | undefined {
  if (value === null || Number.isNaN(value)) return undefined;
  const reaches = (threshold: number, level: Severity) => {
    const sticky = LEVEL_RANK[current] >= LEVEL_RANK[level];
    const limit = sticky ? threshold * clearRatio : threshold;
    return higherIsWorse ? value >= limit : value <= limit;
  };
  if (reaches(thresholds.critical, 'critical')) return 'critical';
  if (reaches(thresholds.warning, 'warning')) return 'warning';
  return 'ok';
}
