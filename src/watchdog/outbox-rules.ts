/**
 * The outbox table's rules (docs/watchdog.md, "Rules"): judged once per poll on the outbox sample
 * (outbox-query.ts), not per slot, with the slot rules' state machine, hysteresis and delivery
 * (alert-engine.ts). A value that could not be read is no verdict (`undefined`): the alert keeps its state.
 */
import { thresholdLevel, type Level } from './alert-state';
import type { OutboxTableSample } from './outbox-query';
import { formatBytes, formatDuration, type RuleVerdict, type WatchdogConfig } from './slot-lag-rules';

export const OUTBOX_RULES = ['OutboxBacklogAge', 'OutboxTableSize'] as const;
export type OutboxRuleName = (typeof OUTBOX_RULES)[number];

export function outboxValues(sample: OutboxTableSample): Record<string, number | string | null> {
  return {
    table: sample.table,
    oldestPendingAgeSeconds: sample.oldestPendingAgeSeconds,
    totalBytes: sample.totalBytes,
    estimatedRows: sample.estimatedRows,
    deadTuples: sample.deadTuples,
    lastAutovacuumAt: sample.lastAutovacuumMs === null ? null : new Date(sample.lastAutovacuumMs).toISOString(),
  };
}

export function evaluateOutboxRule(rule: OutboxRuleName, sample: OutboxTableSample, config: WatchdogConfig, current: Level): RuleVerdict {
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
  }
}
