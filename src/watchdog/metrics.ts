/**
 * Prometheus metrics of the watchdog. Where postgres_exporter (v0.20, collector replication_slots)
 * has the same quantity, the name is the same (`pg_replication_slots_*`, `pg_settings_*`), so
 * dashboards and rules carry over; the rest is `outbox_watchdog_*`. Labels: `cluster`, `slot_name`,
 * `slot_type`, `database`. Series of a slot that disappears are removed. The outbox table's gauges
 * (`outbox_table_*`, `outbox_oldest_pending_age_seconds`; labels `cluster`, `table`) come from the
 * outbox sample (outbox-query.ts) when watchdog.watchOutbox is on; a value not read is removed, not kept stale.
 */
import { Counter, Gauge, Registry } from 'prom-client';
import { collectProcessMetrics } from '../service';
import { LEVEL_RANK } from './alert-state';
import type { OutboxCleanupRun } from '../cleanup';
import type { AlertStatusRow } from './alert-engine';
import type { OutboxTableSample } from './outbox-query';
import type { ServerSettings } from './slot-query';
import type { SlotStatus, TrackedSample } from './slot-tracker';

export interface WatchdogMetrics {
  registry: Registry;
  recordPoll(ok: boolean, durationMs: number, sample?: TrackedSample, settings?: ServerSettings | null): void;
  recordAlerts(rows: AlertStatusRow[]): void;
  /** After each poll that sampled the outbox; `undefined` when its sampling failed. */
  recordOutbox(sample: OutboxTableSample | undefined): void;
  recordDelivery(receiver: string, outcome: 'delivered' | 'retry' | 'failed' | 'dropped'): void;
  setQueue(pending: Record<string, number>): void;
  /** One outbox cleanup run (watchdog.outboxCleanup); null when it failed. */
  recordCleanup(run: OutboxCleanupRun | null): void;
  /** Restarts by the connector supervisor (--restart-failed-connector). */
  connectorRestarts: Counter<'connector'>;
}

const SLOT_LABELS = ['cluster', 'slot_name', 'slot_type', 'database'] as const;

export function createWatchdogMetrics(cluster: string, registry: Registry = new Registry()): WatchdogMetrics {
  collectProcessMetrics(registry);
  const registers = [registry];
  const g = (name: string, help: string, labelNames: readonly string[] = SLOT_LABELS) => new Gauge({ name, help, labelNames: [...labelNames], registers });
  const slotGauges: Array<[Gauge, (s: SlotStatus) => number | null]> = [
    [g('pg_replication_slots_active', 'Whether the slot is being streamed (1) or not (0).'), (s) => (s.active ? 1 : 0)],
    [g('pg_replication_slots_pg_wal_lsn_diff', 'WAL retained by the slot: current LSN − restart_lsn, bytes (postgres_exporter name).'), (s) => s.retainedBytes],
    [g('pg_replication_slots_safe_wal_size_bytes', 'Bytes that can still be written before the slot is lost (PG13+; absent when unlimited).'), (s) => s.safeWalSize],
    [g('outbox_watchdog_slot_confirmed_flush_lag_bytes', 'current LSN − confirmed_flush_lsn: WAL the consumer has not confirmed, bytes.'), (s) => s.flushLagBytes],
    [g('outbox_watchdog_slot_inactive_seconds', 'How long the slot has had no consumer (0 while active).'), (s) => (s.inactiveMs ?? 0) / 1000],
    [g('outbox_watchdog_slot_confirmed_flush_stalled_seconds', 'How long an active slot’s confirmed_flush_lsn has not moved while WAL was written (0 when moving).'), (s) => s.stalledMs / 1000],
    [g('outbox_watchdog_slot_retained_growth_bytes_per_second', 'Growth of retained WAL over the rate window.'), (s) => s.retainedGrowthBytesPerSecond],
    [g('outbox_watchdog_slot_eta_invalidation_seconds', 'Projected time until the slot is invalidated (safe_wal_size ÷ growth); absent when never.'), (s) => (s.etaInvalidationMs === null ? null : s.etaInvalidationMs / 1000)],
    [g('outbox_watchdog_slot_eta_disk_budget_seconds', 'Projected time until retained WAL reaches watchdog.walDiskBudgetBytes; absent when never.'), (s) => (s.etaDiskBudgetMs === null ? null : s.etaDiskBudgetMs / 1000)],
    [g('outbox_watchdog_slot_xmin_age', 'age(xmin) of the slot, transactions.'), (s) => s.xminAge],
    [g('outbox_watchdog_slot_catalog_xmin_age', 'age(catalog_xmin) of the slot, transactions.'), (s) => s.catalogXminAge],
  ];
  const walStatus = g('pg_replication_slots_wal_status', 'wal_status of the slot as a label, value 1 (PG13+).', [...SLOT_LABELS, 'wal_status']);
  const walRate = g('outbox_watchdog_wal_rate_bytes_per_second', 'WAL written per second, over the rate window.', ['cluster']);
  const keepSize = g('pg_settings_max_slot_wal_keep_size_bytes', 'max_slot_wal_keep_size in bytes (-1: unlimited).', ['cluster']);
  const pollUp = g('outbox_watchdog_poll_success', 'Whether the last poll succeeded (1) or failed (0).', ['cluster']);
  const pollDuration = g('outbox_watchdog_poll_duration_seconds', 'Client-side duration of the last poll (round trip included).', ['cluster']);
  const lastSuccess = g('outbox_watchdog_last_success_timestamp_seconds', 'When the last successful poll ended (unix time).', ['cluster']);
  const polls = new Counter({ name: 'outbox_watchdog_polls_total', help: 'Polls by outcome (ok, failed).', labelNames: ['cluster', 'outcome'], registers });
  const alertState = g('outbox_watchdog_alert_state', 'State of each non-OK alert: 1 warning, 2 critical (series removed when OK).', ['cluster', 'slot_name', 'rule']);
  const connectorRestarts = new Counter({ name: 'outbox_watchdog_connector_restarts_total', help: 'FAILED connector instances or tasks restarted by --restart-failed-connector.', labelNames: ['connector'], registers });
  const deliveries = new Counter({ name: 'outbox_watchdog_deliveries_total', help: 'Notification deliveries by receiver and outcome (delivered, retry, failed, dropped).', labelNames: ['receiver', 'outcome'], registers });
  const queue = g('outbox_watchdog_delivery_queue', 'Notifications waiting per receiver.', ['receiver']);
  const outboxGauges: Array<[Gauge, (s: OutboxTableSample) => number | null]> = [
    [g('outbox_table_rows', 'Estimated rows of the outbox table (pg_stat_user_tables.n_live_tup).', ['cluster', 'table']), (s) => s.estimatedRows],
    [g('outbox_table_bytes', 'Size of the outbox table with its indexes and TOAST (pg_total_relation_size), bytes.', ['cluster', 'table']), (s) => s.totalBytes],
    [g('outbox_table_dead_tuples', 'Dead tuples of the outbox table (n_dead_tup): deleted or updated rows autovacuum has not removed yet.', ['cluster', 'table']), (s) => s.deadTuples],
    [g('outbox_table_last_autovacuum_timestamp_seconds', 'When autovacuum last vacuumed the outbox table (unix time; absent when never).', ['cluster', 'table']), (s) => (s.lastAutovacuumMs === null ? null : s.lastAutovacuumMs / 1000)],
    [g('outbox_table_last_vacuum_timestamp_seconds', 'When the outbox table was last vacuumed by hand (unix time; absent when never).', ['cluster', 'table']), (s) => (s.lastVacuumMs === null ? null : s.lastVacuumMs / 1000)],
    [
      g('outbox_table_partition_headroom_seconds', 'A partitioned outbox: seconds until rows have no partition to go to (the newest partition\'s upper bound − now); absent for a plain table.', ['cluster', 'table']),
      (s) => s.partitionHeadroomSeconds,
    ],
    [
      g('outbox_oldest_pending_age_seconds', 'Age of the oldest outbox row with published_at IS NULL (relay: unpublished; CDC: not cleaned up yet); 0 when none.', ['cluster', 'table']),
      (s) => s.oldestPendingAgeSeconds,
    ],
  ];
  let outboxLabels: Record<string, string> | null = null;

  const cleanupRuns = new Counter({ name: 'outbox_cleanup_runs_total', help: 'Outbox cleanup runs under CDC by outcome (ok, no_slot, unregistered, recreated, statistics_missing, failed).', labelNames: ['cluster', 'outcome'], registers });
  const cleanupDeleted = new Counter({ name: 'outbox_cleanup_deleted_rows_total', help: 'Outbox rows deleted by the cleanup after the connector slot confirmed them.', labelNames: ['cluster'], registers });
  const cleanupLastSuccess = g('outbox_cleanup_last_success_timestamp_seconds', 'When the last outbox cleanup run that found the slot ended (unix time).', ['cluster']);
  const cleanupSafeMark = g('outbox_cleanup_safe_mark_timestamp_seconds', 'When the newest mark the slot has confirmed was taken: rows of transactions that ended before it are deleted (unix time).', ['cluster']);

  let known = new Map<string, Record<string, string>>();

  return {
    registry,
    connectorRestarts,
    recordPoll(ok, durationMs, sample, settings) {
      polls.inc({ cluster, outcome: ok ? 'ok' : 'failed' });
      pollUp.set({ cluster }, ok ? 1 : 0);
      pollDuration.set({ cluster }, durationMs / 1000);
      if (!ok || !sample) return;
      lastSuccess.set({ cluster }, Date.now() / 1000);
      if (sample.walRateBytesPerSecond !== null) walRate.set({ cluster }, sample.walRateBytesPerSecond);
      if (settings?.maxSlotWalKeepBytes !== null && settings?.maxSlotWalKeepBytes !== undefined) keepSize.set({ cluster }, settings.maxSlotWalKeepBytes);
      const now = new Map<string, Record<string, string>>();
      for (const s of sample.slots) {
        const labels = { cluster, slot_name: s.slotName, slot_type: s.slotType, database: s.database ?? '' };
        now.set(s.slotName, labels);
        for (const [gauge, value] of slotGauges) {
          const v = value(s);
          if (v === null || Number.isNaN(v)) gauge.remove(labels);
          else gauge.set(labels, v);
        }
        for (const status of ['reserved', 'extended', 'unreserved', 'lost']) walStatus.remove({ ...labels, wal_status: status });
        if (s.walStatus) walStatus.set({ ...labels, wal_status: s.walStatus }, 1);
      }
      for (const [name, labels] of known) {
        if (now.has(name)) continue;
        for (const [gauge] of slotGauges) gauge.remove(labels);
        for (const status of ['reserved', 'extended', 'unreserved', 'lost']) walStatus.remove({ ...labels, wal_status: status });
      }
      known = now;
    },
    recordCleanup(run) {
      const outcome = run === null ? 'failed' : run.refused ? run.refused.replace('-', '_') : run.slotFound ? 'ok' : 'no_slot';
      cleanupRuns.inc({ cluster, outcome });
      if (!run?.slotFound || run.refused === 'unregistered') return;
      cleanupDeleted.inc({ cluster }, run.deleted);
      cleanupLastSuccess.set({ cluster }, Date.now() / 1000);
      if (run.safeTakenAt) cleanupSafeMark.set({ cluster }, Date.parse(run.safeTakenAt) / 1000);
    },
    recordOutbox(sample) {
      if (outboxLabels && (!sample || outboxLabels.table !== sample.table)) for (const [gauge] of outboxGauges) gauge.remove(outboxLabels);
      outboxLabels = sample ? { cluster, table: sample.table } : null;
      if (!sample || !outboxLabels) return;
      for (const [gauge, value] of outboxGauges) {
        const v = sample.present ? value(sample) : null;
        if (v === null || Number.isNaN(v)) gauge.remove(outboxLabels);
        else gauge.set(outboxLabels, v);
      }
    },
    recordAlerts(rows) {
      alertState.reset();
      for (const row of rows) if (row.level !== 'ok') alertState.set({ cluster, slot_name: row.slot ?? '', rule: row.rule }, LEVEL_RANK[row.level]);
    },
    recordDelivery(receiver, outcome) {
      deliveries.inc({ receiver, outcome });
    },
    setQueue(pending) {
      for (const [receiver, n] of Object.entries(pending)) queue.set({ receiver }, n);
    },
  };
}
