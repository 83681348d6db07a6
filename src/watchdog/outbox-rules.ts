/**
 * The outbox table's rules (docs/watchdog.md, "Rules"): judged once per poll on the outbox sample
 * (outbox-query.ts), not per slot, with the slot rules' state machine, hysteresis and delivery
 * (alert-engine.ts). A value that could not be read is no verdict (`undefined`): the alert keeps its state.
 */
import { thresholdLevel, type Level } from './alert-state';
import type { OutboxTableSample } from './outbox-query';
import { formatBytes, formatDuration, type RuleVerdict, type WatchdogConfig } from './slot-lag-rules';

export const OUTBOX_RULES = ['OutboxBacklogAge', 'OutboxTableSize', 'OutboxPartitionsRunningOut'] as const;
export type OutboxRuleName = (typeof OUTBOX_RULES)[number];

/** A partitioned outbox's windows (outbox.partitionSeconds) and how many the cleanup makes ahead (outbox.partitionsAhead). */
export interface OutboxPartitioning {
  seconds: number;
  ahead: number;
}

export function outboxValues(sample: OutboxTableSample): Record<string, number | string | null> {
  return {
    table: sample.table,
    oldestPendingAgeSeconds: sample.oldestPendingAgeSeconds,
    totalBytes: sample.totalBytes,
    estimatedRows: sample.estimatedRows,
    deadTuples: sample.deadTuples,
    lastAutovacuumAt: sample.lastAutovacuumMs === null ? null : new Date(sample.lastAutovacuumMs).toISOString(),
    partitionHeadroomSeconds: sample.partitionHeadroomSeconds,
  };
}

export function evaluateOutboxRule(rule: OutboxRuleName, sample: OutboxTableSample, config: WatchdogConfig, current: Level, partitioning: OutboxPartitioning = { seconds: 3600, ahead: 24 }): RuleVerdict {
  const { table } = sample;
  if (!sample.present) return { level: undefined, summary: `Outbox table ${table} does not exist (not provisioned?): its health cannot be judged.` };
  switch (rule) {
    case 'OutboxBacklogAge': {
      const t = config.rules.outboxBacklogAgeMs;
      const ageMs = sample.oldestPendingAgeSeconds === null ? null : sample.oldestPendingAgeSeconds * 1000;
      if (ageMs === null) return { level: undefined, summary: `Outbox table ${table}: the oldest waiting row cannot be read (${sample.pendingError ?? 'unknown'}).` };
      return {
        level: thresholdLevel(ageMs, t, current, 1),
        summary:
          `The oldest waiting row of outbox table ${table} (published_at IS NULL; under CDC, not yet confirmed by the connector's slot) is ${formatDuration(ageMs)} old (warning ${formatDuration(t.warning)}, critical ${formatDuration(t.critical)}). ` +
          'With the polling relay the relay is not publishing it: check its /healthz and outbox_relay_publish_failures_total. ' +
          'With CDC the connector has not confirmed it: check that the connector streams and that the cleanup runs (docs/operations.md, "Outbox health").',
      };
    }
    case 'OutboxTableSize': {
      const t = config.rules.outboxTableBytes;
      return {
        level: thresholdLevel(sample.totalBytes, t, current, config.clearRatioBytes),
        summary:
          `Outbox table ${table} takes ${formatBytes(sample.totalBytes)} with its indexes (warning ${formatBytes(t.warning)}, critical ${formatBytes(t.critical)}; ` +
          `about ${sample.estimatedRows ?? 'unknown'} rows, ${sample.deadTuples ?? 'unknown'} dead). Rows are not being deleted, or autovacuum cannot keep up; ` +
          'deleted space is reused but not returned to the disk (docs/operations.md, "Outbox health").',
      };
    }
    case 'OutboxPartitionsRunningOut':
      return partitionsRunningOut(sample, partitioning, current);
  }
}

/**
 * A partitioned outbox has partitions only as far ahead as the cleanup made them; past the newest one,
 * every outbox INSERT (and so every business transaction that writes an event) fails. The cleanup
 * normally keeps `ahead` windows in hand: warning below half of that, critical below one window (the
 * next window boundary may find no partition). A plain table is no verdict.
 */
function partitionsRunningOut(sample: OutboxTableSample, p: OutboxPartitioning, current: Level): RuleVerdict {
  const headroom = sample.partitionHeadroomSeconds;
  if (headroom === null) return { level: 'ok', summary: `Outbox table ${sample.table} is not partitioned.` };
  const thresholds = { warning: Math.max(p.seconds, (p.ahead * p.seconds) / 2) * 1000, critical: p.seconds * 1000 };
  return {
    level: thresholdLevel(headroom * 1000, thresholds, current, 1, false),
    summary:
      `Partitioned outbox ${sample.table} has partitions for the next ${formatDuration(headroom * 1000)} only (the cleanup keeps ${p.ahead} windows of ${formatDuration(p.seconds * 1000)} ahead; ` +
      `warning below ${formatDuration(thresholds.warning)}, critical below ${formatDuration(thresholds.critical)}). Past that every outbox INSERT fails with "no partition of relation … found for row" ` +
      'and the business transactions writing events roll back. Only the cleanup makes partitions: check that the watchdog (watchdog.outboxCleanup) or `outbox outbox:cleanup` runs and succeeds ' +
      '(outbox_cleanup_last_success_timestamp_seconds), or run `outbox outbox:cleanup --once` now (docs/operations.md, "Partitioned outbox").',
  };
}
