import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { collectProcessMetrics } from '../service/process-metrics';
import type { RelayEventListener } from './types';

export interface RelayMetrics {
  registry: Registry;
  /** Pass as the relay's `onEvent`: every relay event updates the metrics. */
  onEvent: RelayEventListener;
}

type Counts = Record<string, number>;

/** Prometheus metrics of one relay, fed from its namespaced events. */
export function createRelayMetrics(registry: Registry = new Registry()): RelayMetrics {
  collectProcessMetrics(registry);
  const registers = [registry];
  const published = new Counter({ name: 'outbox_relay_published_total', help: 'Outbox rows published to Kafka, by topic.', labelNames: ['topic'], registers });
  const failures = new Counter({ name: 'outbox_relay_publish_failures_total', help: 'Outbox rows whose publish failed (their aggregate is held back and retried), by topic.', labelNames: ['topic'], registers });
  const batch = new Histogram({ name: 'outbox_relay_batch_size', help: 'Rows per claim transaction that claimed any.', buckets: [1, 5, 10, 50, 100, 250, 500, 1000, 2500, 5000], registers });
  const batchBytes = new Histogram({
    name: 'outbox_relay_batch_bytes',
    help: 'Bytes (payload, key, headers) per claim transaction that claimed any; at most relay.maxBatchBytes plus one row.',
    buckets: [1024, 16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024, 16 * 1024 * 1024, 64 * 1024 * 1024],
    registers,
  });
  const claim = new Histogram({
    name: 'outbox_relay_claim_seconds',
    help: 'Duration of the claim query (advisory shard lock + SELECT … FOR UPDATE SKIP LOCKED).',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers,
  });
  const lag = new Gauge({ name: 'outbox_relay_lag_seconds', help: 'Age of the oldest unpublished outbox row.', registers });
  const backlog = new Gauge({ name: 'outbox_relay_backlog_rows', help: 'Unpublished outbox rows (all instances), counted up to 10,000: a value of 10,000 means at least that many.', registers });
  const blocked = new Gauge({ name: 'outbox_relay_blocked_keys', help: 'Aggregates this instance holds back after a failed publish, until their backoff ends.', registers });
  const queries = new Counter({ name: 'outbox_relay_queries_total', help: 'Statements sent to PostgreSQL by the relay (its database load).', registers });
  const deleted = new Counter({ name: 'outbox_relay_deleted_total', help: 'Published rows deleted after the retention period.', registers });
  const dbErrors = new Counter({ name: 'outbox_relay_db_errors_total', help: 'Claim transactions that failed on the database side and were retried.', registers });
  const add = (counter: Counter<'topic'>, counts: unknown) => {
    for (const [topic, n] of Object.entries((counts ?? {}) as Counts)) counter.inc({ topic }, n);
  };
  return {
    registry,
    onEvent(name, data) {
      if (typeof data.queries === 'number' && data.queries > 0) queries.inc(data.queries);
      if (name === 'relay.batch') {
        add(published, data.publishedByTopic);
        add(failures, data.failedByTopic);
        if (typeof data.claimed === 'number' && data.claimed > 0) batch.observe(data.claimed);
        if (typeof data.bytes === 'number') batchBytes.observe(data.bytes);
        if (typeof data.claimMs === 'number') claim.observe(data.claimMs / 1000);
        if (typeof data.blockedKeys === 'number') blocked.set(data.blockedKeys);
      } else if (name === 'relay.lag' && typeof data.seconds === 'number') {
        lag.set(data.seconds);
        if (typeof data.backlog === 'number') backlog.set(data.backlog);
        if (typeof data.blockedKeys === 'number') blocked.set(data.blockedKeys);
      } else if (name === 'relay.cleanup' && typeof data.deleted === 'number') {
        deleted.inc(data.deleted);
      } else if (name === 'relay.db-error') {
        dbErrors.inc();
      }
    },
  };
}
