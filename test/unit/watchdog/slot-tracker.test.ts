import { createSlotTracker, etaDiskBudgetMs, etaInvalidationMs, projectMs, rateOver } from '../../../src/watchdog/slot-tracker';
import { row, sample } from './fixtures';

const MiB = 1024 * 1024;

describe('projections', () => {
  it('time left = remaining ÷ rate; 0 when used up; null when it never is', () => {
    expect(projectMs(100 * MiB, 1 * MiB)).toBe(100_000);
    expect(projectMs(0, 1 * MiB)).toBe(0);
    expect(projectMs(-5, 1 * MiB)).toBe(0);
    expect(projectMs(100, 0)).toBeNull();
    expect(projectMs(100, null)).toBeNull();
    expect(projectMs(null, 5)).toBeNull();
  });
  it('invalidation ETA from safe_wal_size, disk ETA from the budget', () => {
    expect(etaInvalidationMs(3600 * MiB, MiB)).toBe(3600_000);
    expect(etaInvalidationMs(null, MiB)).toBeNull(); // max_slot_wal_keep_size = -1
    expect(etaDiskBudgetMs(10 * MiB, 4 * MiB, 2 * MiB)).toBe(3000);
    expect(etaDiskBudgetMs(0, 4 * MiB, 2 * MiB)).toBeNull();
    expect(etaDiskBudgetMs(10 * MiB, null, 2 * MiB)).toBeNull();
  });
  it('rate spans the oldest to the newest point', () => {
    expect(rateOver([{ t: 0, v: 0 }])).toBeNull();
    expect(rateOver([{ t: 0, v: 0 }, { t: 500, v: 10 }, { t: 2000, v: 100 }])).toBe(50);
  });
});

describe('slot tracker', () => {
  const options = { rateWindowMs: 60_000, stalledMinWalBytes: 1 * MiB, walDiskBudgetBytes: 100 * MiB };

  it('counts inactive time from the first sighting before PG17, from inactive_since on PG17+', () => {
    const tracker = createSlotTracker(options);
    expect(tracker.track(sample(1_000, 0, [row({ active: true })])).slots[0]?.inactiveMs).toBeNull();
    expect(tracker.track(sample(2_000, 0, [row({ active: false })])).slots[0]).toMatchObject({ inactiveMs: 0, inactiveSource: 'watchdog' });
    expect(tracker.track(sample(9_000, 0, [row({ active: false })])).slots[0]?.inactiveMs).toBe(7_000);
    expect(tracker.track(sample(10_000, 0, [row({ active: true })])).slots[0]?.inactiveMs).toBeNull();
    const pg17 = createSlotTracker(options).track(sample(50_000, 0, [row({ active: false, inactiveSinceMs: 20_000 })]));
    expect(pg17.slots[0]).toMatchObject({ inactiveMs: 30_000, inactiveSource: 'server' });
  });

  it('stalled: active, confirmed_flush_lsn standing still while ≥ stalledMinWalBytes of WAL was written', () => {
    const tracker = createSlotTracker(options);
    tracker.track(sample(0, 0, [row({ confirmedPos: 100 })]));
    // WAL written, but less than the minimum: not stalled
    expect(tracker.track(sample(5_000, MiB / 2, [row({ confirmedPos: 100 })])).slots[0]?.stalledMs).toBe(0);
    expect(tracker.track(sample(10_000, 2 * MiB, [row({ confirmedPos: 100 })])).slots[0]).toMatchObject({ stalledMs: 10_000, walSinceFlushMovedBytes: 2 * MiB });
    // the flush moves: no longer stalled
    expect(tracker.track(sample(11_000, 2 * MiB, [row({ confirmedPos: 2 * MiB })])).slots[0]?.stalledMs).toBe(0);
    // an idle server (no WAL) never counts as stalled
    expect(tracker.track(sample(60_000, 2 * MiB, [row({ confirmedPos: 2 * MiB })])).slots[0]?.stalledMs).toBe(0);
    // an inactive slot is not "stalled" (SlotInactive covers it)
    expect(tracker.track(sample(70_000, 10 * MiB, [row({ active: false, confirmedPos: 2 * MiB })])).slots[0]?.stalledMs).toBe(0);
  });

  it('rates and ETAs from retention growth over the window; vanished slots reported', () => {
    const tracker = createSlotTracker(options);
    tracker.track(sample(0, 0, [row({ retainedBytes: 0, safeWalSize: 50 * MiB })]));
    const second = tracker.track(sample(10_000, 10 * MiB, [row({ retainedBytes: 10 * MiB, safeWalSize: 40 * MiB })]));
    expect(second.walRateBytesPerSecond).toBe(MiB);
    expect(second.slots[0]).toMatchObject({ retainedGrowthBytesPerSecond: MiB, etaInvalidationMs: 40_000, etaDiskBudgetMs: 90_000 });
    const gone = tracker.track(sample(20_000, 11 * MiB, []));
    expect(gone.vanished).toEqual(['s1']);
    expect(gone.slots).toEqual([]);
  });

  it('a lost slot has no retention figures and an invalidation ETA of 0', () => {
    const tracked = createSlotTracker(options).track(sample(0, 0, [row({ walStatus: 'lost', restartLsn: null, restartPos: null, retainedBytes: null, safeWalSize: null })]));
    expect(tracked.slots[0]).toMatchObject({ etaInvalidationMs: 0, retainedGrowthBytesPerSecond: null, etaDiskBudgetMs: null });
  });
});
