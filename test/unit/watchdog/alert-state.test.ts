import { initialAlertState, step, thresholdLevel, type AlertState, type Level, type Timing } from '../../../src/watchdog/alert-state';

/** Feeds observed levels at t = 0, 1000, 2000, … and collects the events. */
function run(levels: Array<Level | undefined>, timing: Timing, start: AlertState = initialAlertState()) {
  let state = start;
  const events: Array<[number, string, Level]> = [];
  levels.forEach((observed, i) => {
    const t = step(state, observed, i * 1000, timing);
    state = t.state;
    if (t.event) events.push([i * 1000, t.event, state.level]);
  });
  return { state, events };
}

describe('alert state machine', () => {
  const timing: Timing = { holdForMs: 2000, clearForMs: 2000, repeatIntervalMs: 0 };

  it('fires only after the condition held for holdForMs', () => {
    const { events } = run(['warning', 'warning', 'warning'], timing);
    expect(events).toEqual([[2000, 'firing', 'warning']]);
  });

  it('a blip shorter than holdForMs never fires', () => {
    const { events, state } = run(['warning', 'ok', 'warning', 'ok', 'warning', 'ok'], timing);
    expect(events).toEqual([]);
    expect(state.level).toBe('ok');
  });

  it('escalates WARNING → CRITICAL, de-escalates and resolves only after clearForMs (no flapping)', () => {
    const { events } = run(['warning', 'warning', 'warning', 'critical', 'critical', 'critical', 'warning', 'critical', 'warning', 'warning', 'warning', 'ok', 'ok', 'ok'], timing);
    expect(events).toEqual([
      [2000, 'firing', 'warning'],
      [5000, 'escalated', 'critical'],
      [10000, 'deescalated', 'warning'],
      [13000, 'resolved', 'ok'],
    ]);
  });

  it('critical straight away fires as critical once held', () => {
    const { events } = run(['critical', 'critical', 'critical'], { ...timing, holdForMs: 0 });
    expect(events).toEqual([[0, 'firing', 'critical']]);
  });

  it('repeats while firing at the repeat interval', () => {
    const { events } = run(['critical', 'critical', 'critical', 'critical', 'critical'], { holdForMs: 0, clearForMs: 0, repeatIntervalMs: 2000 });
    expect(events.map((e) => e.slice(0, 2))).toEqual([
      [0, 'firing'],
      [2000, 'repeat'],
      [4000, 'repeat'],
    ]);
  });

  it('no verdict (failed query, unknown value) changes nothing: never a resolution', () => {
    const { events, state } = run(['critical', undefined, undefined, undefined, undefined], { holdForMs: 0, clearForMs: 0, repeatIntervalMs: 0 });
    expect(events).toEqual([[0, 'firing', 'critical']]);
    expect(state.level).toBe('critical');
  });

  it('counts sequence per episode so notification ids differ', () => {
    const { state } = run(['critical', 'critical', 'ok'], { holdForMs: 0, clearForMs: 0, repeatIntervalMs: 1000 });
    expect(state.level).toBe('ok');
    expect(state.sequence).toBe(3); // firing, repeat, resolved
  });
});

describe('thresholdLevel (value hysteresis)', () => {
  const t = { warning: 100, critical: 200 };
  it('raises at the threshold, clears only below the clear ratio', () => {
    expect(thresholdLevel(99, t, 'ok', 0.9)).toBe('ok');
    expect(thresholdLevel(100, t, 'ok', 0.9)).toBe('warning');
    expect(thresholdLevel(95, t, 'warning', 0.9)).toBe('warning');
    expect(thresholdLevel(89, t, 'warning', 0.9)).toBe('ok');
    expect(thresholdLevel(185, t, 'critical', 0.9)).toBe('critical');
    expect(thresholdLevel(175, t, 'critical', 0.9)).toBe('warning');
    expect(thresholdLevel(null, t, 'critical', 0.9)).toBeUndefined();
  });
  it('for time-left values lower is worse and clears above ratio × threshold', () => {
    const eta = { warning: 6000, critical: 1000 };
    expect(thresholdLevel(7000, eta, 'ok', 1.2, false)).toBe('ok');
    expect(thresholdLevel(6000, eta, 'ok', 1.2, false)).toBe('warning');
    expect(thresholdLevel(900, eta, 'ok', 1.2, false)).toBe('critical');
    expect(thresholdLevel(1150, eta, 'critical', 1.2, false)).toBe('critical');
    expect(thresholdLevel(1250, eta, 'critical', 1.2, false)).toBe('warning');
    expect(thresholdLevel(7100, eta, 'warning', 1.2, false)).toBe('warning');
    expect(thresholdLevel(7300, eta, 'warning', 1.2, false)).toBe('ok');
  });
});
