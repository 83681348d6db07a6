import { messageMsBody } from '../../../src/router/inbox-convert';
import { deleteBoundMs, parsePartitionBound, partitionRange, partitionsPastWindow, partitionsToAdd, type InboxPartition } from '../../../src/router/inbox-partitions';

const DAY = 86_400_000;
const D = Date.UTC(2026, 11, 6); // 2026-12-06T00:00Z, a multiple of DAY

describe('partition bounds from times', () => {
  it('aligns a partition to its width since the epoch (UTC), the start inclusive and the end exclusive', () => {
    expect(partitionRange(D, DAY)).toEqual({ fromMs: D, toMs: D + DAY });
    expect(partitionRange(D + DAY - 1, DAY)).toEqual({ fromMs: D, toMs: D + DAY });
    expect(partitionRange(D + 5 * 3_600_000, 3_600_000)).toEqual({ fromMs: D + 5 * 3_600_000, toMs: D + 6 * 3_600_000 });
    expect(partitionRange(-1, DAY)).toEqual({ fromMs: -DAY, toMs: 0 });
  });

  it('refuses a width that is not a whole number of ms, naming it', () => {
    expect(() => partitionRange(D, 0)).toThrow(/partition width 0 ms/);
    expect(() => partitionRange(D, 1.5)).toThrow(/partition width 1.5 ms/);
  });

  it('has the current partition and `ahead` after it ready', () => {
    expect(partitionsToAdd(D + 3_600_000, DAY, 2)).toEqual([D, D + DAY, D + 2 * DAY]);
  });

  it('reads the bounds PostgreSQL prints for a range partition, the catch-all (MINVALUE) included, and nothing else', () => {
    expect(parsePartitionBound(`FOR VALUES FROM ('${D}') TO ('${D + DAY}')`)).toEqual({ fromMs: D, toMs: D + DAY });
    expect(parsePartitionBound("FOR VALUES FROM (MINVALUE) TO ('1')")).toEqual({ fromMs: null, toMs: 1 });
    expect(parsePartitionBound('DEFAULT')).toBeUndefined();
    expect(parsePartitionBound("FOR VALUES IN ('a')")).toBeUndefined();
  });
});

describe('which partitions may drop', () => {
  const catchAll: InboxPartition = { name: 'inbox_other', fromMs: null, toMs: 1 };
  const day = (n: number): InboxPartition => ({ name: `p${n}`, fromMs: D + n * DAY, toMs: D + (n + 1) * DAY });
  const parts = [day(2), catchAll, day(0), day(1), day(3)];

  it('only time partitions whose whole range ends at or before the window start, oldest first; never the catch-all', () => {
    expect(partitionsPastWindow(parts, D + 2 * DAY).map((p) => p.name)).toEqual(['p0', 'p1']);
    // A partition the window's start falls inside stays: part of it is still inside the window.
    expect(partitionsPastWindow(parts, D + 2 * DAY - 1).map((p) => p.name)).toEqual(['p0']);
    expect(partitionsPastWindow(parts, D)).toEqual([]);
    expect(partitionsPastWindow([catchAll], Number.MAX_SAFE_INTEGER)).toEqual([]);
  });

  it('the DELETE prune reaches only below the newest partition past the window (the catch-all alone when none is)', () => {
    expect(deleteBoundMs(parts, D + 2 * DAY)).toBe(D + 2 * DAY);
    expect(deleteBoundMs(parts, D + 2 * DAY - 1)).toBe(D + DAY);
    expect(deleteBoundMs(parts, D)).toBe(1);
  });
});

describe('the key function of a conversion', () => {
  it('returns the UUIDv7 timestamp only from the cutover on, 0 for anything else', () => {
    const body = messageMsBody(D + DAY);
    expect(body).toContain(`>= ${D + DAY} THEN`);
    expect(body).toContain("'^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'");
    expect(body).toMatch(/ELSE 0 END$/);
  });
});
