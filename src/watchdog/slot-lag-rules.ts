/**
 * The alert rules (docs/watchdog.md, "Rules"). Each judges one slot's facts and returns a level, or
 * `undefined` when the facts it needs are unknown (then its alert keeps its state).
 */
import type { OutboxConfig } from '../config';
import { thresholdLevel, type Level } from './alert-state';
import type { FailoverRuleName } from './failover-rules';
import type { OutboxRuleName } from './outbox-rules';
import type { ServerSettings } from './slot-query';
import type { SlotStatus } from './slot-tracker';

export type WatchdogConfig = OutboxConfig['watchdog'];

export const SLOT_RULES = [
  'SlotInvalidated',
  'SlotWalUnreserved',
  'SlotRetainedHigh',
  'SlotInvalidationImminent',
  'SlotDiskFullPredicted',
  'SlotInactive',
  'SlotConsumerStalled',
] as const;
export type SlotRuleName = (typeof SLOT_RULES)[number];
export type RuleName = SlotRuleName | OutboxRuleName | FailoverRuleName | 'SlotMissing' | 'PublicationDrift' | 'WatchdogDatabaseUnreachable';

export interface RuleContext {
  config: WatchdogConfig;
  settings: ServerSettings | null;
  current: Level;
}

export interface RuleVerdict {
  level: Level | undefined;
  summary: string;
}

export function formatBytes(n: number | null): string {
  if (n === null) return 'unknown';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = Math.abs(n);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${n < 0 ? '-' : ''}${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

export function formatDuration(ms: number | null): string {
  if (ms === null) return 'never';
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s}s`;
  const m = Math.round(s / 60);
  if (m < 120) return `${m}m`;
  const h = m / 60;
  return h < 48 ? `${h.toFixed(1)}h` : `${(h / 24).toFixed(1)}d`;
}

/** Retained-bytes thresholds: a share of max_slot_wal_keep_size when it is set, else the absolute ones. */
export function retainedThresholds(config: WatchdogConfig, settings: ServerSettings | null): { warning: number; critical: number; basis: string } {
  const keep = settings?.maxSlotWalKeepBytes ?? -1;
  if (keep > 0) {
    const pct = config.rules.retainedPercentOfKeepSize;
    return { warning: (keep * pct.warning) / 100, critical: (keep * pct.critical) / 100, basis: `of max_slot_wal_keep_size ${formatBytes(keep)}` };
  }
  return { ...config.rules.retainedBytes, basis: 'absolute (max_slot_wal_keep_size = -1)' };
}

export function ruleHoldForMs(rule: RuleName, config: WatchdogConfig): number {
  const r = config.rules;
  switch (rule) {
    case 'SlotRetainedHigh':
      return r.retainedForMs;
    case 'SlotInvalidationImminent':
      return r.invalidationForMs;
    case 'SlotDiskFullPredicted':
      return r.diskFullForMs;
    case 'SlotInactive':
      return r.inactiveForMs;
    case 'SlotConsumerStalled':
      return r.stalledForMs;
    case 'PublicationDrift':
      return r.publicationDriftForMs;
    case 'OutboxBacklogAge':
      return r.outboxBacklogAgeForMs;
    case 'OutboxTableSize':
      return r.outboxTableSizeForMs;
    case 'FailoverSlotNotReady':
      return r.failoverSlotNotReadyForMs;
    default:
      return 0;
  }
}

export function evaluateSlotRule(rule: SlotRuleName, slot: SlotStatus, ctx: RuleContext): RuleVerdict {
  const { config, settings, current } = ctx;
  const name = slot.slotName;
  switch (rule) {
    case 'SlotInvalidated': {
      const invalid = slot.walStatus === 'lost' || slot.invalidationReason !== null || slot.conflicting === true;
      const why = slot.invalidationReason ?? (slot.conflicting ? 'conflict with recovery' : 'wal_status lost');
      return {
        level: invalid ? 'critical' : 'ok',
        summary: invalid
          ? `Slot ${name} is invalidated (${why}): its consumer can no longer stream, and the events in the WAL it lost can only come from the outbox table: recover with \`outbox connector:deploy --resnapshot\` or the relay (docs/operations.md, "Slot invalidation").`
          : `Slot ${name} is valid.`,
      };
    }
    case 'SlotWalUnreserved': {
      if (slot.walStatus === null) return { level: undefined, summary: `Slot ${name}: wal_status unknown.` };
      const bad = slot.walStatus === 'unreserved';
      return {
        level: bad ? 'critical' : 'ok',
        summary: bad
          ? `Slot ${name} has wal_status unreserved (safe_wal_size ${formatBytes(slot.safeWalSize)}): WAL it needs will be removed at the next checkpoint unless the consumer catches up now.`
          : `Slot ${name} WAL is reserved (${slot.walStatus}).`,
      };
    }
    case 'SlotRetainedHigh': {
      const t = retainedThresholds(config, settings);
      const level = thresholdLevel(slot.retainedBytes, t, current, config.clearRatioBytes);
      return {
        level,
        summary: `Slot ${name} retains ${formatBytes(slot.retainedBytes)} of WAL (warning ${formatBytes(Math.round(t.warning))}, critical ${formatBytes(Math.round(t.critical))}, ${t.basis}); ${slot.active ? 'consumer connected' : 'no consumer connected'}.`,
      };
    }
    case 'SlotInvalidationImminent': {
      if (slot.safeWalSize === null) return { level: slot.walStatus === 'lost' ? undefined : 'ok', summary: `Slot ${name}: no invalidation limit (max_slot_wal_keep_size = -1).` };
      const eta = slot.etaInvalidationMs;
      const level = eta === null ? 'ok' : thresholdLevel(eta, config.rules.invalidationEtaMs, current, config.clearRatioTime, false);
      return {
        level,
        summary: `Slot ${name} will be invalidated in about ${formatDuration(eta)} (safe_wal_size ${formatBytes(slot.safeWalSize)}, growing ${formatBytes(slot.retainedGrowthBytesPerSecond === null ? null : Math.round(slot.retainedGrowthBytesPerSecond))}/s).`,
      };
    }
    case 'SlotDiskFullPredicted': {
      if (config.walDiskBudgetBytes <= 0) return { level: 'ok', summary: 'No WAL disk budget configured.' };
      const eta = slot.etaDiskBudgetMs;
      const level = eta === null ? (slot.retainedBytes === null ? undefined : 'ok') : thresholdLevel(eta, config.rules.diskFullEtaMs, current, config.clearRatioTime, false);
      return {
        level,
        summary: `Slot ${name} fills the WAL disk budget ${formatBytes(config.walDiskBudgetBytes)} in about ${formatDuration(eta)} (retains ${formatBytes(slot.retainedBytes)}, growing ${formatBytes(slot.retainedGrowthBytesPerSecond === null ? null : Math.round(slot.retainedGrowthBytesPerSecond))}/s).`,
      };
    }
    case 'SlotInactive': {
      const level = slot.active ? 'ok' : thresholdLevel(slot.inactiveMs, config.rules.inactiveMs, current, 1);
      const since = slot.inactiveSource === 'watchdog' ? ' (at least: counted since the watchdog first saw it; PostgreSQL < 17 does not record it)' : '';
      return {
        level,
        summary: slot.active
          ? `Slot ${name} has a consumer.`
          : `Slot ${name} has had no consumer for ${formatDuration(slot.inactiveMs)}${since} and pins ${formatBytes(slot.retainedBytes)} of WAL. Restart its consumer (connector), or drop the slot if it is abandoned — never drop an in-use Debezium slot.`,
      };
    }
    case 'SlotConsumerStalled': {
      const level = slot.active ? thresholdLevel(slot.stalledMs, config.rules.stalledMs, current, 1) : 'ok';
      return {
        level: slot.confirmedFlushLsn === null && slot.slotType === 'logical' ? undefined : level,
        summary: `Slot ${name} is connected${slot.applicationName ? ` (${slot.applicationName})` : ''} but confirmed_flush_lsn has not moved for ${formatDuration(slot.stalledMs)} while ${formatBytes(slot.walSinceFlushMovedBytes)} of WAL was written: the consumer is stuck (for Debezium: Kafka reachable? offsets committing? heartbeat.interval.ms set?).`,
      };
    }
  }
}
