import { createAlertEngine, dedupKey } from '../../../src/watchdog/alert-engine';
import { createSlotTracker } from '../../../src/watchdog/slot-tracker';
import { evaluateSlotRule, retainedThresholds } from '../../../src/watchdog/slot-lag-rules';
import type { ServerSettings } from '../../../src/watchdog/slot-query';
import type { PublicationCheck } from '../../../src/connector/publication-check';
import { row, sample, wdConfig } from './fixtures';

const MiB = 1024 * 1024;
const settings: ServerSettings = { versionNum: 150000, maxSlotWalKeepBytes: -1, walKeepBytes: 0, maxWalBytes: 1024 * MiB, walSegmentBytes: 16 * MiB, walSenderTimeoutMs: 60_000 };

function harness(watchdog: Parameters<typeof wdConfig>[0]) {
  const config = wdConfig(watchdog);
  let clock = 0;
  const engine = createAlertEngine({ config, cluster: 'c1', now: () => clock });
  const tracker = createSlotTracker({ rateWindowMs: config.rateWindowMs, stalledMinWalBytes: config.rules.stalledMinWalBytes, walDiskBudgetBytes: config.walDiskBudgetBytes });
  return {
    engine,
    poll(t: number, pos: number, slots: ReturnType<typeof row>[]) {
      clock = t;
      return engine.evaluate(tracker.track(sample(t, pos, slots)), settings);
    },
    fail(t: number, reason: string) {
      clock = t;
      return engine.pollFailed(reason);
    },
  };
}

const fast = { clearForMs: 0, repeatIntervalMs: 0, rules: { retainedBytes: { warning: 1 * MiB, critical: 4 * MiB }, retainedForMs: 0, inactiveMs: { warning: 60_000, critical: 120_000 } } };

describe('alert engine', () => {
  it('inactive slot with growing WAL: WARNING then CRITICAL then resolved, one dedup key', () => {
    const h = harness(fast);
    expect(h.poll(0, 0, [row({ active: false, retainedBytes: 0 })])).toEqual([]);
    const warn = h.poll(1000, 2 * MiB, [row({ active: false, retainedBytes: 2 * MiB })]);
    expect(warn.map((n) => [n.rule, n.event, n.severity, n.status])).toEqual([['SlotRetainedHigh', 'firing', 'warning', 'firing']]);
    const crit = h.poll(2000, 5 * MiB, [row({ active: false, retainedBytes: 5 * MiB })]);
    expect(crit.map((n) => [n.rule, n.event, n.severity])).toEqual([['SlotRetainedHigh', 'escalated', 'critical']]);
    const resolved = h.poll(3000, 5 * MiB, [row({ active: true, retainedBytes: 0 })]);
    expect(resolved.map((n) => [n.rule, n.event, n.status, n.severity])).toEqual([['SlotRetainedHigh', 'resolved', 'resolved', 'critical']]);
    const keys = new Set([...warn, ...crit, ...resolved].map((n) => n.dedupKey));
    expect([...keys]).toEqual([dedupKey('c1', 's1', 'SlotRetainedHigh')]);
    expect(new Set([...warn, ...crit, ...resolved].map((n) => n.id)).size).toBe(3);
    expect(resolved[0]?.endsAt).toBe(new Date(3000).toISOString());
    expect(resolved[0]?.startsAt).toBe(new Date(1000).toISOString());
  });

  it('dedup key is stable per cluster + slot + rule and differs otherwise', () => {
    expect(dedupKey('c1', 's1', 'SlotInactive')).toBe(dedupKey('c1', 's1', 'SlotInactive'));
    expect(new Set([dedupKey('c1', 's1', 'SlotInactive'), dedupKey('c2', 's1', 'SlotInactive'), dedupKey('c1', 's2', 'SlotInactive'), dedupKey('c1', 's1', 'SlotRetainedHigh')]).size).toBe(4);
  });

  it('a failed poll fires the watchdog’s own alert and never resolves slot alerts; recovery resolves it', () => {
    const h = harness(fast);
    h.poll(0, 0, [row({ retainedBytes: 2 * MiB })]);
    const failed = h.fail(1000, 'connect ECONNREFUSED');
    expect(failed.map((n) => [n.rule, n.event, n.severity, n.slot])).toEqual([['WatchdogDatabaseUnreachable', 'firing', 'critical', null]]);
    expect(failed[0]?.summary).toMatch(/ECONNREFUSED/);
    expect(h.fail(2000, 'again')).toEqual([]);
    expect(h.engine.statuses().find((s) => s.rule === 'SlotRetainedHigh')?.level).toBe('warning');
    const back = h.poll(3000, 2 * MiB, [row({ retainedBytes: 2 * MiB })]);
    expect(back.map((n) => [n.rule, n.event])).toEqual([['WatchdogDatabaseUnreachable', 'resolved']]);
  });

  it('a slot that disappears ends its alerts as dropped, not resolved', () => {
    const h = harness(fast);
    h.poll(0, 0, [row({ retainedBytes: 2 * MiB })]);
    const gone = h.poll(1000, 0, []);
    expect(gone.map((n) => [n.rule, n.event, n.status])).toEqual([['SlotRetainedHigh', 'dropped', 'dropped']]);
    expect(gone[0]?.summary).toMatch(/no longer exists/);
  });

  it('a slot listed in watchdog.slots that is missing fires SlotMissing', () => {
    const h = harness({ ...fast, slots: ['s1', 'expected'] });
    const out = h.poll(0, 0, [row()]);
    expect(out.map((n) => [n.rule, n.slot?.name, n.severity])).toEqual([['SlotMissing', 'expected', 'critical']]);
    expect(h.poll(1000, 0, [row(), row({ slotName: 'expected' })]).map((n) => [n.rule, n.event])).toEqual([['SlotMissing', 'resolved']]);
  });

  it('stalled-but-active fires while active stays true', () => {
    const h = harness({ clearForMs: 0, rules: { stalledMs: { warning: 2000, critical: 60_000 }, stalledMinWalBytes: MiB } });
    h.poll(0, 0, [row({ confirmedPos: 10 })]);
    expect(h.poll(1000, 2 * MiB, [row({ confirmedPos: 10 })])).toEqual([]);
    const out = h.poll(2500, 3 * MiB, [row({ confirmedPos: 10 })]);
    expect(out.map((n) => [n.rule, n.severity, n.values.active])).toEqual([['SlotConsumerStalled', 'warning', true]]);
    expect(h.poll(3000, 3 * MiB, [row({ confirmedPos: 3 * MiB })]).map((n) => [n.rule, n.event])).toEqual([['SlotConsumerStalled', 'resolved']]);
  });

  it('invalidated, unreserved and projection rules', () => {
    const config = wdConfig({ walDiskBudgetBytes: 100 * MiB });
    const ctx = { config, settings, current: 'ok' as const };
    const base = { inactiveMs: null, inactiveSource: null, stalledMs: 0, walSinceFlushMovedBytes: 0, retainedGrowthBytesPerSecond: null, etaInvalidationMs: null, etaDiskBudgetMs: null };
    expect(evaluateSlotRule('SlotInvalidated', { ...row({ walStatus: 'lost' }), ...base }, ctx).level).toBe('critical');
    expect(evaluateSlotRule('SlotInvalidated', { ...row({ invalidationReason: 'wal_removed' }), ...base }, ctx).summary).toMatch(/wal_removed.*connector:deploy --resnapshot/);
    expect(evaluateSlotRule('SlotInvalidated', { ...row(), ...base }, ctx).level).toBe('ok');
    expect(evaluateSlotRule('SlotWalUnreserved', { ...row({ walStatus: 'unreserved', safeWalSize: -5 }), ...base }, ctx).level).toBe('critical');
    expect(evaluateSlotRule('SlotInvalidationImminent', { ...row({ safeWalSize: 10 * MiB }), ...base, etaInvalidationMs: 30 * 60_000 }, ctx).level).toBe('critical');
    expect(evaluateSlotRule('SlotInvalidationImminent', { ...row({ safeWalSize: 10 * MiB }), ...base, etaInvalidationMs: 3 * 3600_000 }, ctx).level).toBe('warning');
    expect(evaluateSlotRule('SlotInvalidationImminent', { ...row({ safeWalSize: 10 * MiB }), ...base, etaInvalidationMs: null }, ctx).level).toBe('ok');
    expect(evaluateSlotRule('SlotDiskFullPredicted', { ...row({ retainedBytes: MiB }), ...base, etaDiskBudgetMs: 3 * 3600_000 }, ctx).level).toBe('critical');
    expect(evaluateSlotRule('SlotDiskFullPredicted', { ...row({ retainedBytes: MiB }), ...base, etaDiskBudgetMs: 48 * 3600_000 }, ctx).level).toBe('ok');
  });

  it('retained thresholds are a share of max_slot_wal_keep_size when it is set', () => {
    const config = wdConfig();
    expect(retainedThresholds(config, { ...settings, maxSlotWalKeepBytes: 1000 * MiB })).toMatchObject({ warning: 250 * MiB, critical: 500 * MiB });
    expect(retainedThresholds(config, settings)).toMatchObject({ warning: 5 * 1024 * MiB, critical: 20 * 1024 * MiB });
  });
});

describe('the connector pipeline (watchdog.watchConnector)', () => {
  const ok: PublicationCheck = { publication: 'outbox_publication', schema: 'public', table: 'outbox', ok: true, exists: true, pubinsert: true, puballtables: false, tablePublished: true, rowFilter: null, problems: [] };
  const drifted: PublicationCheck = { ...ok, ok: false, pubinsert: false, problems: ['publication "outbox_publication" does not publish inserts (pubinsert = false: …)'] };

  function pipeline(watchdog: Parameters<typeof wdConfig>[0], connectorSlot = 'outbox_slot') {
    const config = wdConfig(watchdog);
    let clock = 0;
    const engine = createAlertEngine({ config, cluster: 'c1', now: () => clock, connectorSlot });
    const tracker = createSlotTracker({ rateWindowMs: config.rateWindowMs, stalledMinWalBytes: config.rules.stalledMinWalBytes, walDiskBudgetBytes: config.walDiskBudgetBytes });
    return (t: number, slots: ReturnType<typeof row>[], publication?: PublicationCheck) => {
      clock = t;
      return engine.evaluate(tracker.track(sample(t, 0, slots)), settings, publication).map((n) => [n.rule, n.slot?.name, n.event, n.severity]);
    };
  }

  it('with watchdog.slots empty, a missing connector slot fires SlotMissing and its return resolves it', () => {
    const poll = pipeline({ clearForMs: 0 });
    const fired = poll(0, [row({ slotName: 'other' })]);
    expect(fired).toEqual([['SlotMissing', 'outbox_slot', 'firing', 'critical']]);
    expect(poll(1000, [row({ slotName: 'other' }), row({ slotName: 'outbox_slot' })])).toEqual([['SlotMissing', 'outbox_slot', 'resolved', 'critical']]);
  });

  it('names the connector setting and the relay-only switch in the summary; the switch turns it off', () => {
    const config = wdConfig({});
    const engine = createAlertEngine({ config, cluster: 'c1', now: () => 0, connectorSlot: 'outbox_slot' });
    const [n] = engine.evaluate(createSlotTracker({ rateWindowMs: 1, stalledMinWalBytes: 1, walDiskBudgetBytes: 0 }).track(sample(0, 0, [])), settings);
    expect(n?.summary).toMatch(/connector\.slotName.*watchdog\.watchConnector=false/);
    expect(pipeline({ watchConnector: false })(0, [])).toEqual([]);
    // A listed set of slots is what the operator asked for: the connector's slot is not added to it.
    expect(pipeline({ slots: ['s1'] })(0, [row({ slotName: 's1' })])).toEqual([]);
  });

  it('PublicationDrift fires CRITICAL on the connector slot, honours hold-for and clear-for, and resolves after the repair', () => {
    const poll = pipeline({ clearForMs: 2_000, rules: { publicationDriftForMs: 1_000 } });
    const slots = [row({ slotName: 'outbox_slot' })];
    expect(poll(0, slots, ok)).toEqual([]);
    expect(poll(1_000, slots, drifted)).toEqual([]);
    expect(poll(2_000, slots, drifted)).toEqual([['PublicationDrift', 'outbox_slot', 'firing', 'critical']]);
    expect(poll(3_000, slots, ok)).toEqual([]);
    expect(poll(5_000, slots, ok)).toEqual([['PublicationDrift', 'outbox_slot', 'resolved', 'critical']]);
  });

  it('a drift alert of a slot that disappears ends as dropped, and SlotMissing takes over', () => {
    const poll = pipeline({ clearForMs: 0 });
    expect(poll(0, [row({ slotName: 'outbox_slot' })], drifted)).toEqual([['PublicationDrift', 'outbox_slot', 'firing', 'critical']]);
    expect(poll(1_000, [])).toEqual([
      ['PublicationDrift', 'outbox_slot', 'dropped', 'critical'],
      ['SlotMissing', 'outbox_slot', 'firing', 'critical'],
    ]);
  });
});
