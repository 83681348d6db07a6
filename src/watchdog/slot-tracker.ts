/**
 * State the watchdog keeps across polls, turned into per-slot facts the rules judge: how long a slot
 * has been inactive (PostgreSQL only tracks it from 17 on), how long an active slot's
 * confirmed_flush_lsn has stood still while WAL was written, growth rates, and the projections.
 * Pure: all times come from the samples (the server clock), so tests need no real time.
 */
import type { ServerSettings, SlotRow, SlotSample } from './slot-query';

export interface SlotStatus extends SlotRow {
  /** ms without a consumer; null while active. */
  inactiveMs: number | null;
  /** `server`: from inactive_since (PG17+); `watchdog`: since the watchdog first saw it inactive (a lower bound). */
  inactiveSource: 'server' | 'watchdog' | null;
  /** ms an active slot's confirmed_flush_lsn has not moved although ≥ stalledMinWalBytes of WAL was written; 0 when not stalled. */
  stalledMs: number;
  /** WAL written since confirmed_flush_lsn last moved. */
  walSinceFlushMovedBytes: number | null;
  /** Growth of retained WAL over the rate window (bytes/s, ≥ 0); null until two samples exist. */
  retainedGrowthBytesPerSecond: number | null;
  /** Time until safe_wal_size is used up at that growth; null when it never is (or unknown). */
  etaInvalidationMs: number | null;
  /** Time until retained WAL reaches the WAL disk budget at that growth; null when no budget or no growth. */
  etaDiskBudgetMs: number | null;
}

export interface TrackedSample {
  sampledAtMs: number;
  inRecovery: boolean;
  currentLsn: string | null;
  walRateBytesPerSecond: number | null;
  slots: SlotStatus[];
  /** Slots seen on the previous poll that are gone now. */
  vanished: string[];
}

export interface TrackerOptions {
  rateWindowMs: number;
  stalledMinWalBytes: number;
  walDiskBudgetBytes: number;
}

interface Point {
  t: number;
  v: number;
}

interface SlotMemory {
  firstInactiveAt: number | null;
  confirmedPos: number | null;
  confirmedMovedAt: number;
  curPosAtConfirmedMove: number | null;
  retained: Point[];
}

/** Seconds until `remaining` bytes are used at `bytesPerSecond`; 0 when already used, null when never. */
export function projectMs(remaining: number | null, bytesPerSecond: number | null): number | null {
  if (remaining === null) return null;
  if (remaining <= 0) return 0;
  if (bytesPerSecond === null || bytesPerSecond <= 0) return null;
  return Math.round((remaining / bytesPerSecond) * 1000);
}

/** Time until the slot is invalidated: safe_wal_size over the retention growth (null if max_slot_wal_keep_size = -1). */
export function etaInvalidationMs(safeWalSize: number | null, bytesPerSecond: number | null): number | null {
  return projectMs(safeWalSize, bytesPerSecond);
}

/** Time until the slot's retained WAL fills the configured budget (0 = no budget: null). */
export function etaDiskBudgetMs(budgetBytes: number, retainedBytes: number | null, bytesPerSecond: number | null): number | null {
  if (budgetBytes <= 0 || retainedBytes === null) return null;
  return projectMs(budgetBytes - retainedBytes, bytesPerSecond);
}

/** Rate of change over the window (per second) from the oldest to the newest point. */
export function rateOver(points: readonly Point[]): number | null {
  if (points.length < 2) return null;
  const a = points[0] as Point;
  const b = points[points.length - 1] as Point;
  const dt = (b.t - a.t) / 1000;
  return dt > 0 ? (b.v - a.v) / dt : null;
}

function prune(points: Point[], now: number, windowMs: number): void {
  // keep one point at or before the window start so the rate always spans the full window
  while (points.length > 2 && (points[1] as Point).t <= now - windowMs) points.shift();
}

export interface SlotTracker {
  track(sample: SlotSample, settings?: ServerSettings): TrackedSample;
  forget(slotName: string): void;
}

export function createSlotTracker(options: TrackerOptions): SlotTracker {
  const memory = new Map<string, SlotMemory>();
  const wal: Point[] = [];

  return {
    forget: (slotName) => void memory.delete(slotName),
    track(sample) {
      const now = sample.sampledAtMs;
      if (sample.currentPos !== null) {
        wal.push({ t: now, v: sample.currentPos });
        prune(wal, now, options.rateWindowMs);
      }
      const walRate = rateOver(wal);
      const seen = new Set<string>();
      const slots = sample.slots.map((row): SlotStatus => {
        seen.add(row.slotName);
        let m = memory.get(row.slotName);
        if (!m) {
          m = { firstInactiveAt: null, confirmedPos: row.confirmedPos, confirmedMovedAt: now, curPosAtConfirmedMove: sample.currentPos, retained: [] };
          memory.set(row.slotName, m);
        }
        // inactive duration: the server's inactive_since (PG17+) or our own first sighting
        m.firstInactiveAt = row.active ? null : (m.firstInactiveAt ?? now);
        const inactiveMs = row.active ? null : row.inactiveSinceMs !== null ? Math.max(0, now - row.inactiveSinceMs) : now - (m.firstInactiveAt as number);
        // confirmed_flush_lsn movement
        if (row.confirmedPos !== m.confirmedPos) {
          m.confirmedPos = row.confirmedPos;
          m.confirmedMovedAt = now;
          m.curPosAtConfirmedMove = sample.currentPos;
        }
        const walSince = sample.currentPos !== null && m.curPosAtConfirmedMove !== null ? sample.currentPos - m.curPosAtConfirmedMove : null;
        const stalledMs = row.active && row.confirmedPos !== null && walSince !== null && walSince >= options.stalledMinWalBytes ? now - m.confirmedMovedAt : 0;
        // retention growth
        if (row.retainedBytes !== null) {
          m.retained.push({ t: now, v: row.retainedBytes });
          prune(m.retained, now, options.rateWindowMs);
        } else {
          m.retained = [];
        }
        const growth = rateOver(m.retained);
        const growthClamped = growth === null ? null : Math.max(0, growth);
        return {
          ...row,
          inactiveMs,
          inactiveSource: row.active ? null : row.inactiveSinceMs !== null ? 'server' : 'watchdog',
          stalledMs,
          walSinceFlushMovedBytes: walSince,
          retainedGrowthBytesPerSecond: growthClamped,
          etaInvalidationMs: row.walStatus === 'lost' ? 0 : etaInvalidationMs(row.safeWalSize, growthClamped),
          etaDiskBudgetMs: etaDiskBudgetMs(options.walDiskBudgetBytes, row.retainedBytes, growthClamped),
        };
      });
      const vanished = [...memory.keys()].filter((name) => !seen.has(name));
      for (const name of vanished) memory.delete(name);
      return { sampledAtMs: now, inRecovery: sample.inRecovery, currentLsn: sample.currentLsn, walRateBytesPerSecond: walRate, slots, vanished };
    },
  };
}
