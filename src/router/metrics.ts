import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { collectProcessMetrics } from '../service';
import { createRecordWaits } from './record-waits';
import { PRUNE_BLOCK_REASONS } from './inbox-retention';
import type { RouterEventListener } from './types';

export interface RouterMetrics {
  registry: Registry;
  /** Pass as the router's `onEvent`: every router event updates the metrics. */
  onEvent: RouterEventListener;
}

/** Prometheus metrics of one router, fed from its namespaced events. */
export function createRouterMetrics(registry: Registry = new Registry()): RouterMetrics {
  collectProcessMetrics(registry);
  const registers = [registry];
  const records = new Counter({ name: 'outbox_router_records_total', help: 'Records finished, by topic and outcome (applied, duplicate, dead_lettered, skipped).', labelNames: ['topic', 'outcome'], registers });
  const retries = new Counter({ name: 'outbox_router_retries_total', help: 'Failed handler attempts that were tried again.', labelNames: ['topic'], registers });
  const waits = new Counter({ name: 'outbox_router_infrastructure_waits_total', help: 'Waits on the registry, the database or the dead-letter producer, by error code.', labelNames: ['code'], registers });
  const transaction = new Histogram({
    name: 'outbox_router_transaction_seconds',
    help: 'Inbox transaction including the handler, per applied or duplicate record.',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers,
  });
  const latency = new Histogram({
    name: 'outbox_router_commit_to_handled_seconds',
    help: 'From the Kafka record timestamp (Connect produced it right after the commit was read) to the effect committed.',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers,
  });
  const lag = new Gauge({ name: 'outbox_router_consumer_lag', help: 'Records behind the high watermark after the last batch, per topic and partition.', labelNames: ['topic', 'partition'], registers });
  const blocked = new Gauge({ name: 'outbox_router_blocked_records', help: "Records past maxAttempts held under the 'block' policy (their partitions wait).", labelNames: ['topic'], registers });
  const replaysForOthers = new Counter({
    name: 'outbox_router_replays_for_other_consumers_total',
    help: 'Replayed records for another consumer (x-replay-consumer), skipped here (also counted as outcome skipped).',
    labelNames: ['topic'],
    registers,
  });
  const splits = new Counter({ name: 'outbox_router_chunk_splits_total', help: 'Multi-record inbox transactions that failed and were retried one record per transaction.', labelNames: ['topic'], registers });
  const pruned = new Counter({ name: 'outbox_router_inbox_pruned_total', help: 'Inbox rows deleted past router.inboxRetentionMs.', registers });
  const lastPrune = new Gauge({ name: 'outbox_router_inbox_last_prune_timestamp_seconds', help: 'When the last inbox prune run ended (Unix time).', registers });
  const pruneSeconds = new Gauge({ name: 'outbox_router_inbox_last_prune_duration_seconds', help: 'How long the last inbox prune run took.', registers });
  const pruneBlocked = new Gauge({ name: 'outbox_router_inbox_prune_blocked', help: '1 while the inbox prune is stopped for this reason (a routed topic compacted, kept forever, longer-lived than the window, or unreadable), else 0.', labelNames: ['reason'], registers });
  const unblock = () => PRUNE_BLOCK_REASONS.forEach((reason) => pruneBlocked.set({ reason }, 0));
  unblock();
  const partitionsDropped = new Counter({ name: 'outbox_router_inbox_partitions_dropped_total', help: 'Inbox partitions dropped past router.inboxRetentionMs (a partitioned inbox).', registers });
  const partitionRows = new Counter({ name: 'outbox_router_inbox_partition_rows_dropped_total', help: 'Inbox rows removed with the partitions dropped.', registers });
  const partitionsKept = new Counter({ name: 'outbox_router_inbox_partitions_kept_total', help: 'Partition drops refused by reason (parked, other-consumers, processed-late, lock-timeout), per run.', labelNames: ['reason'], registers });
  const partitionLock = new Gauge({ name: 'outbox_router_inbox_partition_last_lock_seconds', help: 'The last partition run: the longest lock wait (wait), the longest time a partition was locked (held: checks, count, DROP) and the longest DROP (drop: the parent locked, inserts wait).', labelNames: ['phase'], registers });
  const inboxRows = new Gauge({ name: 'outbox_router_inbox_rows_estimate', help: "The inbox's row count as the planner estimates it (pg_class.reltuples), every consumer's rows.", registers });
  const parkedKeys = new Gauge({ name: 'outbox_router_parked_keys', help: "This consumer's parked keys (their events go to the DLQ until replayed or released), by aggregate type.", labelNames: ['aggregate_type'], registers });
  const parkedEvents = new Gauge({ name: 'outbox_router_parked_events', help: "This consumer's parked events (rows of the parked-keys table), by aggregate type.", labelNames: ['aggregate_type'], registers });
  const parkedOldest = new Gauge({ name: 'outbox_router_parked_oldest_seconds', help: "Age of this consumer's longest-parked event, by aggregate type.", labelNames: ['aggregate_type'], registers });
  // Read when scraped: a wait's age grows between events.
  const held = createRecordWaits();
  new Gauge({
    name: 'outbox_router_waiting_records',
    help: 'Records held now while decoding waits on the schema registry (their partitions wait with them), by error code.',
    labelNames: ['code'],
    registers,
    collect() {
      this.reset();
      for (const w of held.list()) this.inc({ code: w.code });
    },
  });
  new Gauge({
    name: 'outbox_router_waiting_oldest_seconds',
    help: 'How long the longest-waiting of those records has waited, by error code.',
    labelNames: ['code'],
    registers,
    collect() {
      this.reset();
      // list() is longest-waiting first: the first of each code is its oldest.
      const seen = new Set<string>();
      for (const w of held.list()) if (!seen.has(w.code) && seen.add(w.code)) this.set({ code: w.code }, w.seconds);
    },
  });
  // Partitions this instance has reported lag for: after a rebalance, those it no longer owns are removed,
  // or their last value would stay, and a sum over replicas would count a partition twice, one of them stale.
  const lagged = new Map<string, { topic: string; partition: string }>();
  return {
    registry,
    onEvent(name, data) {
      held.onEvent(name, data);
      const topic = String(data.topic ?? '');
      if (name === 'router.applied' || name === 'router.duplicate') {
        records.inc({ topic, outcome: name === 'router.applied' ? 'applied' : 'duplicate' });
        if (typeof data.transactionMs === 'number') transaction.observe(data.transactionMs / 1000);
        if (name === 'router.applied' && typeof data.recordTimestamp === 'number') latency.observe(Math.max(0, Date.now() - data.recordTimestamp) / 1000);
      } else if (name === 'router.dead-letter') {
        records.inc({ topic, outcome: 'dead_lettered' });
      } else if (name === 'router.skipped') {
        records.inc({ topic, outcome: 'skipped' });
      } else if (name === 'router.replay-skipped') {
        replaysForOthers.inc({ topic });
      } else if (name === 'router.lag') {
        const labels = { topic, partition: String(data.partition) };
        lag.set(labels, Number(data.lag));
        lagged.set(`${labels.topic}\u0000${labels.partition}`, labels);
      } else if (name === 'router.group-join') {
        const assignment = (data.assignment ?? {}) as Record<string, number[]>;
        for (const [key, labels] of lagged) {
          if ((assignment[labels.topic] ?? []).map(String).includes(labels.partition)) continue;
          lag.remove(labels);
          lagged.delete(key);
        }
      } else if (name === 'router.blocked') {
        blocked.inc({ topic });
      } else if (name === 'router.unblocked') {
        blocked.dec({ topic });
      } else if (name === 'router.chunk-split') {
        splits.inc({ topic });
      } else if (name === 'router.retry') {
        retries.inc({ topic });
      } else if (name === 'router.inbox-pruned') {
        pruned.inc(Number(data.deleted ?? 0));
        lastPrune.set(Date.now() / 1000);
        pruneSeconds.set(Number(data.ms ?? 0) / 1000);
        inboxRows.set(Number(data.rows ?? 0));
      } else if (name === 'router.inbox-partitions') {
        partitionsDropped.inc(Number(data.dropped ?? 0));
        partitionRows.inc(Number(data.rows ?? 0));
        for (const [reason, n] of Object.entries((data.kept ?? {}) as Record<string, number>)) if (reason !== 'too-new') partitionsKept.inc({ reason }, n);
        partitionLock.set({ phase: 'wait' }, Number(data.lockWaitMs ?? 0) / 1000);
        partitionLock.set({ phase: 'held' }, Number(data.heldMs ?? 0) / 1000);
        partitionLock.set({ phase: 'drop' }, Number(data.dropMs ?? 0) / 1000);
      } else if (name === 'router.inbox-prune-blocked') {
        unblock();
        for (const reason of (data.reasons ?? []) as string[]) pruneBlocked.set({ reason }, 1);
      } else if (name === 'router.inbox-prune-resumed') {
        unblock();
      } else if (name === 'router.parked') {
        // Types no longer parked drop out rather than keep their last value.
        for (const gauge of [parkedKeys, parkedEvents, parkedOldest]) gauge.reset();
        for (const t of (data.types ?? []) as Array<{ aggregateType: string; keys: number; events: number; oldestSeconds: number }>) {
          parkedKeys.set({ aggregate_type: t.aggregateType }, t.keys);
          parkedEvents.set({ aggregate_type: t.aggregateType }, t.events);
          parkedOldest.set({ aggregate_type: t.aggregateType }, t.oldestSeconds);
        }
      } else if (name === 'router.wait') {
        waits.inc({ code: String(data.code ?? 'unknown') });
      }
    },
  };
}
