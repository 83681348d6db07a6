import { z } from 'zod';
import type { EnvSetting } from './env-setting';
import { STACK_HOST, STACK_PORTS } from './local-stack';

/**
 * Settings of the watchdog (src/watchdog). Part of the root schema as `watchdog`. Defaults follow the
 * the thresholds documented in docs/watchdog.md ("Rules"); every number is configurable. Durations are milliseconds, sizes
 * bytes. docs/watchdog.md lists every setting with its default.
 */

const ms = (what: string) => z.number({ error: `${what}: a number of milliseconds` }).int(`${what}: a whole number of milliseconds`).nonnegative(`${what}: 0 or more milliseconds`);
const bytes = (what: string) => z.number({ error: `${what}: a number of bytes` }).int(`${what}: a whole number of bytes`).positive(`${what}: more than 0 bytes`);
const url = z.url({ error: 'an http(s) URL such as http://127.0.0.1:9093' }).refine((u) => /^https?:\/\//i.test(u), 'must start with http:// or https://');

/** A pair of thresholds; warning must be reached before critical (checked below). */
const thresholds = (value: (what: string) => z.ZodNumber, name: string, warning: number, critical: number) =>
  z.object({ warning: value(`${name}.warning`).default(warning), critical: value(`${name}.critical`).default(critical) }).strict().prefault({});
const percent = (what: string) => z.number({ error: `${what}: a percentage` }).positive(`${what}: more than 0`).max(100, `${what}: at most 100`);

export const watchdogRulesSchema = z
  .object({
    /** retained WAL (pg_wal_lsn_diff(current, restart_lsn)) — absolute fallback when max_slot_wal_keep_size = -1. */
    retainedBytes: thresholds(bytes, 'retainedBytes', 5 * 1024 ** 3, 20 * 1024 ** 3),
    /** retained WAL as a share of max_slot_wal_keep_size, when that is set (≥ 0). */
    retainedPercentOfKeepSize: thresholds(percent, 'retainedPercentOfKeepSize', 25, 50),
    retainedForMs: ms('retainedForMs').default(10 * 60_000),
    /** time until safe_wal_size is used up at the slot's current retention growth. */
    invalidationEtaMs: thresholds(ms, 'invalidationEtaMs', 6 * 3600_000, 3600_000),
    invalidationForMs: ms('invalidationForMs').default(5 * 60_000),
    /** time until the slot's retained WAL reaches `walDiskBudgetBytes`. */
    diskFullEtaMs: thresholds(ms, 'diskFullEtaMs', 24 * 3600_000, 4 * 3600_000),
    diskFullForMs: ms('diskFullForMs').default(10 * 60_000),
    /** how long a slot has had no consumer. */
    inactiveMs: thresholds(ms, 'inactiveMs', 10 * 60_000, 60 * 60_000),
    inactiveForMs: ms('inactiveForMs').default(0),
    /** how long an active slot's confirmed_flush_lsn has not moved while WAL was written. */
    stalledMs: thresholds(ms, 'stalledMs', 15 * 60_000, 60 * 60_000),
    /** WAL written since confirmed_flush_lsn last moved before a standing flush counts as stalled (one segment). */
    stalledMinWalBytes: bytes('stalledMinWalBytes').default(16 * 1024 * 1024),
    stalledForMs: ms('stalledForMs').default(0),
    /** how long the publication must have stopped publishing outbox inserts before PublicationDrift fires. */
    publicationDriftForMs: ms('publicationDriftForMs').default(0),
    /** consecutive failed polls before the watchdog's own "cannot reach the database" alert fires. */
    unreachableAfterFailures: z.number().int().positive().default(1),
    /**
     * OutboxBacklogAge: age of the oldest outbox row still waiting (published_at IS NULL). With the relay,
     * the oldest unpublished event; with CDC, the oldest row not cleaned up yet (docs/operations.md, "Outbox health").
     */
    outboxBacklogAgeMs: thresholds(ms, 'outboxBacklogAgeMs', 15 * 60_000, 60 * 60_000),
    /** The age already is a duration: no extra hold by default. */
    outboxBacklogAgeForMs: ms('outboxBacklogAgeForMs').default(0),
    /** OutboxTableSize: pg_total_relation_size of the outbox table (heap, indexes, TOAST). */
    outboxTableBytes: thresholds(bytes, 'outboxTableBytes', 1024 ** 3, 10 * 1024 ** 3),
    outboxTableSizeForMs: ms('outboxTableSizeForMs').default(10 * 60_000),
    /**
     * FailoverSlotNotReady holds this long before it fires: the standby's sync worker copies a new or
     * advanced slot on its own cycle (up to 30 s while idle), and a new slot stays temporary there until
     * the primary's slot has moved past the position the standby reserved (its consumer must stream).
     */
    failoverSlotNotReadyForMs: ms('failoverSlotNotReadyForMs').default(2 * 60_000),
  })
  .strict()
  .refine((r) => r.retainedBytes.warning <= r.retainedBytes.critical, { message: 'retainedBytes.warning must not exceed retainedBytes.critical', path: ['retainedBytes'] })
  .refine((r) => r.retainedPercentOfKeepSize.warning <= r.retainedPercentOfKeepSize.critical, { message: 'retainedPercentOfKeepSize.warning must not exceed .critical', path: ['retainedPercentOfKeepSize'] })
  .refine((r) => r.inactiveMs.warning <= r.inactiveMs.critical, { message: 'inactiveMs.warning must not exceed inactiveMs.critical', path: ['inactiveMs'] })
  .refine((r) => r.stalledMs.warning <= r.stalledMs.critical, { message: 'stalledMs.warning must not exceed stalledMs.critical', path: ['stalledMs'] })
  .refine((r) => r.invalidationEtaMs.warning >= r.invalidationEtaMs.critical, { message: 'invalidationEtaMs.warning must be at least invalidationEtaMs.critical (a time left: warning comes first)', path: ['invalidationEtaMs'] })
  .refine((r) => r.diskFullEtaMs.warning >= r.diskFullEtaMs.critical, { message: 'diskFullEtaMs.warning must be at least diskFullEtaMs.critical (a time left: warning comes first)', path: ['diskFullEtaMs'] })
  .refine((r) => r.outboxBacklogAgeMs.warning <= r.outboxBacklogAgeMs.critical, { message: 'outboxBacklogAgeMs.warning must not exceed outboxBacklogAgeMs.critical', path: ['outboxBacklogAgeMs'] })
  .refine((r) => r.outboxTableBytes.warning <= r.outboxTableBytes.critical, { message: 'outboxTableBytes.warning must not exceed outboxTableBytes.critical', path: ['outboxTableBytes'] });

export const watchdogDeliverySchema = z
  .object({
    requestTimeoutMs: z.number().int().positive().default(10_000),
    /** attempts per notification, the first included, before it is given up (logged and counted). */
    maxAttempts: z.number().int().positive().default(12),
    initialDelayMs: z.number().int().positive().default(1_000),
    maxDelayMs: z.number().int().positive().default(5 * 60_000),
    /** give a notification up once it has been retried for this long. */
    ceilingMs: z.number().int().positive().default(60 * 60_000),
    /** upper bound for a receiver's Retry-After. */
    maxRetryAfterMs: z.number().int().positive().default(10 * 60_000),
    /** notifications waiting per receiver; beyond it the oldest is given up (logged and counted). */
    maxQueue: z.number().int().positive().default(1_000),
  })
  .strict();

export const watchdogSchema = z
  .object({
    /** Poll every this many ms (15–30 s is the usual range: a poll costs under a millisecond, and alerts need hold-for anyway). */
    intervalMs: z.number().int().min(50, 'intervalMs: at least 50 ms').default(15_000),
    /** Name of the cluster in alerts and the dedup key; default `<host>:<port>` of the database. */
    cluster: z.string().min(1).max(200).optional(),
    /** Only these slots (default: every slot). A listed slot that does not exist fires SlotMissing. */
    slots: z.array(z.string().min(1)).default([]),
    /**
     * Watch this config's Debezium pipeline: with `slots` empty, the connector's slot (connector.slotName)
     * must exist (SlotMissing); while it exists in this database, the publication must publish inserts
     * of the outbox table (PublicationDrift). false for a relay-only deployment, which has no slot.
     */
    watchConnector: z.boolean().default(true),
    /**
     * Outbox cleanup under CDC (docs/operations.md, "Outbox cleanup under CDC"): while watchConnector is
     * on, delete in batches the outbox rows the connector's slot has confirmed, every intervalMs. Runs
     * through the SECURITY DEFINER function of migration 011, so the watchdog's role needs no privilege on
     * the outbox. Off only if something else cleans the outbox (insert-then-delete writers, pg_cron).
     */
    outboxCleanup: z
      .object({
        enabled: z.boolean().default(true),
        intervalMs: z.number().int().min(100, 'outboxCleanup.intervalMs: at least 100 ms').default(60_000),
        batchSize: z.number().int().min(1).max(100_000).default(5_000),
        /** DELETE statements per run at most (a run under a steady stream must end). */
        maxBatches: z.number().int().min(1).default(100),
      })
      .strict()
      .prefault({}),
    /**
     * Sample the outbox table (outbox.schema/table) every poll: size, rows, dead tuples, last vacuum and
     * the age of the oldest waiting row, as gauges and the OutboxBacklogAge / OutboxTableSize rules.
     * Independent of watchConnector: a relay-only deployment has an outbox too.
     */
    watchOutbox: z.boolean().default(true),
    /**
     * A PostgreSQL 17+ standby of the watched primary (docs/watchdog.md, "Failover slots"): every poll reads
     * its pg_replication_slots and fires FailoverSlotNotReady when a failover slot of the primary is missing
     * there, not synced, temporary or invalidated. `databaseUrl` is a postgres:// URL; a user or password it
     * leaves out is watchdog.user / watchdog.password (else database.*). Its credentials are never printed.
     */
    standby: z
      .object({
        databaseUrl: z
          .string()
          .regex(/^postgres(ql)?:\/\/[^\s]+$/, 'a postgres:// URL such as postgres://monitor@standby-host:5432/app')
          .optional(),
      })
      .strict()
      .prefault({}),
    /** Connect as this role (a role with pg_monitor is enough); default: database.user / database.password. */
    user: z.string().min(1).optional(),
    password: z.string().min(1).optional(),
    statementTimeoutMs: z.number().int().positive().default(5_000),
    connectTimeoutMs: z.number().int().positive().default(5_000),
    /** Size of the disk (or share of it) WAL may use; enables SlotDiskFullPredicted. 0 = not set. */
    walDiskBudgetBytes: z.number().int().nonnegative().default(0),
    /** Window over which WAL and retention growth rates are measured. */
    rateWindowMs: z.number().int().positive().default(5 * 60_000),
    /** Hysteresis: a firing alert needs its condition gone this long before it de-escalates or resolves (keep_firing_for). */
    clearForMs: ms('clearForMs').default(10 * 60_000),
    /** Bytes thresholds clear below this share of the raise threshold (0.9 = 90 %). */
    clearRatioBytes: z.number().positive().max(1).default(0.9),
    /** Time-left thresholds clear above this multiple of the raise threshold (1.2 = 120 %). */
    clearRatioTime: z.number().min(1).default(1.2),
    /** Send a firing alert again while it keeps firing. 0 = never. */
    repeatIntervalMs: ms('repeatIntervalMs').default(4 * 3600_000),
    /** Generic JSON webhook (docs/watchdog.md); signed per Standard Webhooks when webhookSecret is set. */
    webhookUrl: url.optional(),
    /** Standard Webhooks secret: `whsec_` + base64 of 24–64 random bytes. */
    webhookSecret: z
      .string()
      .refine((s) => {
        if (!/^whsec_[A-Za-z0-9+/]+={0,2}$/.test(s)) return false;
        const n = Buffer.from(s.slice(6), 'base64').length;
        return n >= 24 && n <= 64;
      }, 'must be whsec_ followed by the base64 of 24–64 random bytes (Standard Webhooks); generate one with: echo "whsec_$(openssl rand -base64 32)"')
      .optional(),
    /** Slack incoming-webhook URL. It embeds a token, hence the name: it is never printed. */
    slackWebhookSecretUrl: url.optional(),
    /** Alertmanager base URL; alerts go to `POST <url>/api/v2/alerts`. */
    alertmanagerUrl: url.optional(),
    /** Firing alerts are re-posted to Alertmanager this often, so its resolve_timeout never ends them. */
    alertmanagerResendMs: z.number().int().positive().default(60_000),
    /** Link put into alerts (generatorURL, Slack). */
    runbookUrl: url.default('https://github.com/outbox-router/outbox-router/blob/main/docs/watchdog.md#troubleshooting'),
    delivery: watchdogDeliverySchema.prefault({}),
    rules: watchdogRulesSchema.prefault({}),
    /**
     * Also watch the connector (connector.name) and restart its FAILED tasks, with backoff (5 s doubling to
     * 10 min): Connect never restarts a FAILED task itself (src/watchdog/connector-supervisor.ts).
     */
    restartFailedConnector: z.boolean().default(false),
    /** `outbox watchdog`'s /metrics, /livez, /readyz and /healthz. */
    metricsPort: z.number().int().min(0).max(65535).default(STACK_PORTS.watchdogMetrics),
    metricsHost: z.string().min(1).default(STACK_HOST),
  })
  .strict();

/** Environment variables that feed `watchdog.*` settings (merged into ENV_SETTINGS). */
export const WATCHDOG_ENV_SETTINGS: ReadonlyArray<EnvSetting> = [
  { env: 'OUTBOX_WATCHDOG_INTERVAL_MS', path: ['watchdog', 'intervalMs'] },
  { env: 'OUTBOX_WATCHDOG_CLUSTER', path: ['watchdog', 'cluster'] },
  { env: 'OUTBOX_WATCHDOG_SLOTS', path: ['watchdog', 'slots'] },
  { env: 'OUTBOX_WATCHDOG_WATCH_CONNECTOR', path: ['watchdog', 'watchConnector'] },
  { env: 'OUTBOX_WATCHDOG_OUTBOX_CLEANUP', path: ['watchdog', 'outboxCleanup', 'enabled'] },
  { env: 'OUTBOX_WATCHDOG_OUTBOX_CLEANUP_INTERVAL_MS', path: ['watchdog', 'outboxCleanup', 'intervalMs'] },
  { env: 'OUTBOX_WATCHDOG_OUTBOX_CLEANUP_BATCH_SIZE', path: ['watchdog', 'outboxCleanup', 'batchSize'] },
  { env: 'OUTBOX_WATCHDOG_WATCH_OUTBOX', path: ['watchdog', 'watchOutbox'] },
  { env: 'OUTBOX_WATCHDOG_USER', path: ['watchdog', 'user'] },
  { env: 'OUTBOX_WATCHDOG_PASSWORD', path: ['watchdog', 'password'] },
  { env: 'OUTBOX_WATCHDOG_STATEMENT_TIMEOUT_MS', path: ['watchdog', 'statementTimeoutMs'] },
  { env: 'OUTBOX_WATCHDOG_WAL_DISK_BUDGET_BYTES', path: ['watchdog', 'walDiskBudgetBytes'] },
  { env: 'OUTBOX_WATCHDOG_CLEAR_FOR_MS', path: ['watchdog', 'clearForMs'] },
  { env: 'OUTBOX_WATCHDOG_REPEAT_INTERVAL_MS', path: ['watchdog', 'repeatIntervalMs'] },
  { env: 'OUTBOX_WATCHDOG_WEBHOOK_URL', path: ['watchdog', 'webhookUrl'] },
  { env: 'OUTBOX_WATCHDOG_WEBHOOK_SECRET', path: ['watchdog', 'webhookSecret'] },
  { env: 'OUTBOX_WATCHDOG_SLACK_WEBHOOK_SECRET_URL', path: ['watchdog', 'slackWebhookSecretUrl'] },
  { env: 'OUTBOX_WATCHDOG_ALERTMANAGER_URL', path: ['watchdog', 'alertmanagerUrl'] },
  { env: 'OUTBOX_WATCHDOG_RETAINED_WARNING_BYTES', path: ['watchdog', 'rules', 'retainedBytes', 'warning'] },
  { env: 'OUTBOX_WATCHDOG_RETAINED_CRITICAL_BYTES', path: ['watchdog', 'rules', 'retainedBytes', 'critical'] },
  { env: 'OUTBOX_WATCHDOG_INACTIVE_WARNING_MS', path: ['watchdog', 'rules', 'inactiveMs', 'warning'] },
  { env: 'OUTBOX_WATCHDOG_INACTIVE_CRITICAL_MS', path: ['watchdog', 'rules', 'inactiveMs', 'critical'] },
  { env: 'OUTBOX_WATCHDOG_STALLED_WARNING_MS', path: ['watchdog', 'rules', 'stalledMs', 'warning'] },
  { env: 'OUTBOX_WATCHDOG_STALLED_CRITICAL_MS', path: ['watchdog', 'rules', 'stalledMs', 'critical'] },
  { env: 'OUTBOX_WATCHDOG_OUTBOX_AGE_WARNING_MS', path: ['watchdog', 'rules', 'outboxBacklogAgeMs', 'warning'] },
  { env: 'OUTBOX_WATCHDOG_OUTBOX_AGE_CRITICAL_MS', path: ['watchdog', 'rules', 'outboxBacklogAgeMs', 'critical'] },
  { env: 'OUTBOX_WATCHDOG_OUTBOX_WARNING_BYTES', path: ['watchdog', 'rules', 'outboxTableBytes', 'warning'] },
  { env: 'OUTBOX_WATCHDOG_OUTBOX_CRITICAL_BYTES', path: ['watchdog', 'rules', 'outboxTableBytes', 'critical'] },
  { env: 'OUTBOX_WATCHDOG_RESTART_FAILED_CONNECTOR', path: ['watchdog', 'restartFailedConnector'] },
  { env: 'OUTBOX_WATCHDOG_METRICS_PORT', path: ['watchdog', 'metricsPort'] },
  { env: 'OUTBOX_WATCHDOG_METRICS_HOST', path: ['watchdog', 'metricsHost'] },
];
