import { z } from 'zod';
import { STACK_HOST, STACK_PORTS } from './local-stack';
import type { EnvSetting } from './env-setting';

const positiveInt = (max: number) => z.number().int().min(1).max(max);

/**
 * Settings of the polling relay (src/relay, docs/relay.md). Part of the root schema as `relay`.
 * Every instance of the relay working one outbox table must use the same `workers`: it is the shard
 * count, and shards are what keeps per-aggregate order (the relay refuses to start otherwise).
 */
export const relaySchema = z
  .object({
    /**
     * Shards of the outbox, one worker (an async loop) each: `hashtext(aggregate_id) mod workers`. Same value on
     * every instance. Workers share a pool of at most `poolSize` connections, used only inside a claim transaction.
     */
    workers: positiveInt(10_000).default(4),
    /** Database connections of one relay instance (workers queue for them), plus one for cleanup and lag. */
    poolSize: positiveInt(200).default(8),
    /** Rows claimed (FOR UPDATE SKIP LOCKED) and published per transaction. */
    batchSize: positiveInt(10_000).default(500),
    /**
     * Bytes per claim (payload, key and headers, as sent), so a batch of large payloads cannot hold batchSize
     * of them in memory at once: rows are claimed until this is reached, always at least one, so a batch
     * holds at most this plus one row. Memory of one instance ≈ workers × maxBatchBytes (+ one row each).
     */
    maxBatchBytes: positiveInt(1024 * 1024 * 1024).default(16 * 1024 * 1024),
    /** Wait between polls when a shard had less than a full batch; a full batch polls again at once. */
    pollIntervalMs: positiveInt(60_000).default(100),
    /**
     * Wait after a claim that found rows but not a full batch: more are likely on their way, so the shard
     * polls again soon. Each empty claim doubles the wait, up to pollIntervalMs. 0: poll again at once.
     */
    minPollIntervalMs: z.number().int().min(0).max(60_000).default(5),
    /**
     * Wake on LISTEN/NOTIFY instead of waiting out the poll interval. `db:provision` with this on adds a
     * statement-level trigger to the outbox that sends one NOTIFY per inserting transaction, and the relay
     * LISTENs on a dedicated connection; polling stays the fallback. Off by default: CDC-only deployments
     * pay nothing for a trigger they do not need. It costs writers: PostgreSQL serializes the commits of
     * transactions that NOTIFY (docs/relay.md has the measurements). Provision and run the relay with the same value.
     */
    notify: z.boolean().default(false),
    /** Published rows are kept this long (for audits and replays), then deleted; 0 deletes them at the next cleanup. */
    retentionMs: z.number().int().min(0).default(24 * 60 * 60 * 1000),
    /** How often published rows past retention are deleted. */
    cleanupIntervalMs: positiveInt(24 * 60 * 60 * 1000).default(60_000),
    /** Rows per DELETE statement, so a cleanup never holds many locks or one long transaction. */
    cleanupBatchSize: positiveInt(100_000).default(5_000),
    /** How often the age of the oldest unpublished row (the lag gauge) is measured. */
    lagIntervalMs: positiveInt(60 * 60 * 1000).default(5_000),
    /** Backoff of a key whose publish failed: it is retried after this, doubling up to maxDelayMs (with jitter). */
    retryInitialDelayMs: z.number().int().min(0).default(200),
    retryMaxDelayMs: z.number().int().min(0).default(30_000),
    /**
     * /healthz answers 503 once no row has been published for this long while publishes keep failing (or
     * every claim failed on the database side). An idle relay, with nothing to publish, stays healthy.
     */
    unhealthyAfterMs: positiveInt(24 * 60 * 60 * 1000).default(60_000),
    /** Topics the relay creates when they are missing, as Connect's topic.creation.default.* does for CDC. */
    topicPartitions: positiveInt(10_000).default(3),
    /** unset: min(3, brokers) (src/topics/replication.ts): 1 on the one-broker local stack, 3 on a production cluster. */
    topicReplicationFactor: positiveInt(100).optional(),
    /** unset: 2 on a cluster of 3+ brokers, else the broker's default. */
    topicMinInsyncReplicas: positiveInt(100).optional(),
    /** `outbox relay`'s /metrics, /livez, /readyz and /healthz. */
    metricsPort: z.number().int().min(0).max(65535).default(STACK_PORTS.relayMetrics),
    metricsHost: z.string().min(1).default(STACK_HOST),
  })
  .strict();

export type RelayConfig = z.output<typeof relaySchema>;

/** Environment variables that feed `relay.*` settings (merged into ENV_SETTINGS). */
export const RELAY_ENV_SETTINGS: ReadonlyArray<EnvSetting> = [
  { env: 'OUTBOX_RELAY_WORKERS', path: ['relay', 'workers'] },
  { env: 'OUTBOX_RELAY_BATCH_SIZE', path: ['relay', 'batchSize'] },
  { env: 'OUTBOX_RELAY_MAX_BATCH_BYTES', path: ['relay', 'maxBatchBytes'] },
  { env: 'OUTBOX_RELAY_POLL_INTERVAL_MS', path: ['relay', 'pollIntervalMs'] },
  { env: 'OUTBOX_RELAY_MIN_POLL_INTERVAL_MS', path: ['relay', 'minPollIntervalMs'] },
  { env: 'OUTBOX_RELAY_NOTIFY', path: ['relay', 'notify'] },
  { env: 'OUTBOX_RELAY_RETENTION_MS', path: ['relay', 'retentionMs'] },
  { env: 'OUTBOX_RELAY_CLEANUP_INTERVAL_MS', path: ['relay', 'cleanupIntervalMs'] },
  { env: 'OUTBOX_RELAY_CLEANUP_BATCH_SIZE', path: ['relay', 'cleanupBatchSize'] },
  { env: 'OUTBOX_RELAY_UNHEALTHY_AFTER_MS', path: ['relay', 'unhealthyAfterMs'] },
  { env: 'OUTBOX_RELAY_METRICS_PORT', path: ['relay', 'metricsPort'] },
  { env: 'OUTBOX_RELAY_METRICS_HOST', path: ['relay', 'metricsHost'] },
];
