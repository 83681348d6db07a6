import { z } from 'zod';
import type { EnvSetting } from './env-setting';
import { STACK_HOST, STACK_PORTS } from './local-stack';
import { AVRO_CONTENT_TYPE, CONTENT_TYPES, JSON_CONTENT_TYPE, normalizeContentType } from '../codec/content-type';
import { VALUE_FORMATS } from '../envelope/value-format';

/** A Kafka header name: printable, no spaces (a typo with a space would silently never match). */
const headerName = z.string().regex(/^[\x21-\x7e]{1,100}$/, 'a header name: 1-100 printable characters, no spaces');

/**
 * How the router reads a record's envelope (docs/adopting-debezium-outbox.md): the defaults are this
 * project's connector template; a stock Debezium Outbox Event Router needs at most these.
 */
export const envelopeSchema = z
  .object({
    /** The header carrying the event id: the Event Router puts `table.field.event.id` in header `id`. */
    idHeader: headerName.default('id'),
    /** The header carrying the event type (`table.fields.additional.placement=type:header:eventType`). */
    eventTypeHeader: headerName.default('eventType'),
    /** Read the event type from this value field instead (`type:envelope:<field>` placement); the value is then `{ payload, <field> }`. */
    eventTypeField: z.string().min(1).max(100).optional(),
    /**
     * The content type of a record without a `contentType` header (valueFormat `bytes`): application/json or
     * application/vnd.apache.avro+binary. Unset: such a record is dead-lettered (RECORD_INVALID).
     * The other value formats decide the encoding themselves and ignore it.
     */
    defaultContentType: z
      .string()
      .refine((v) => normalizeContentType(v) !== undefined, `one of ${CONTENT_TYPES.join(', ')}`)
      .transform((v) => normalizeContentType(v) as typeof JSON_CONTENT_TYPE | typeof AVRO_CONTENT_TYPE)
      .optional(),
    /** The connector's value converter, as the router reads it (src/envelope/value-format.ts). */
    valueFormat: z.enum(VALUE_FORMATS).default('bytes'),
  })
  .strict()
  .superRefine((e, ctx) => {
    if (e.eventTypeField !== undefined && (e.valueFormat === 'bytes' || e.valueFormat === 'string')) {
      ctx.addIssue({
        code: 'custom',
        path: ['eventTypeField'],
        message: `needs a structured value (valueFormat json, json-with-schema or avro); with valueFormat ${e.valueFormat} the value is the payload alone: place the type in a header instead`,
      });
    }
    if (e.eventTypeField === undefined && e.idHeader === e.eventTypeHeader) {
      ctx.addIssue({ code: 'custom', path: ['eventTypeHeader'], message: `is the same header as idHeader (${e.idHeader}); the id and the event type are two headers` });
    }
  })
  .prefault({});

export const UNKNOWN_EVENT_TYPE_POLICIES = ['dead-letter', 'skip', 'block'] as const;
export type UnknownEventTypePolicy = (typeof UNKNOWN_EVENT_TYPE_POLICIES)[number];

const backoff = (initialDelayMs: number) =>
  z.object({ initialDelayMs: z.number().int().min(0).default(initialDelayMs), maxDelayMs: z.number().int().min(0).default(30_000) }).prefault({});

/** What `createRouter` takes besides its objects (handlers, codec, pool): validated once, defaults here. */
export const routerSettingsSchema = z
  .object({
    /**
     * The inbox's `consumer` column: one per logical consumer, shared by its replicas. Required outside
     * the local stack: two services that both kept a default would share a group and an inbox.
     */
    consumer: z.string().min(1).max(200).optional(),
    /** Kafka consumer group; defaults to `consumer`. */
    groupId: z.string().min(1).optional(),
    /** A groupId other than `consumer` is refused unless this is set (the inbox is keyed by consumer, not group). */
    allowGroupIdMismatch: z.boolean().default(false),
    /** Attempts of a failing handler, the first included, before the record is dead-lettered. */
    maxAttempts: z.number().int().min(1).max(1_000).default(5),
    backoff: backoff(200),
    infrastructureBackoff: backoff(500),
    /** Partitions handled at once; records of one partition are always handled one at a time, in order. */
    partitionsConsumedConcurrently: z.number().int().min(1).max(256).default(4),
    /**
     * The longest a fetch waits at the broker when no record comes. A record ends the wait at once (the
     * fetch asks for 1 byte), so this is not a latency floor; it is how often an idle router asks again:
     * 50 ms made 20 empty fetches a second per router, the idle pipeline's largest Node cost. At most a
     * third of sessionTimeoutMs (kafkajs heartbeats between fetches).
     */
    maxWaitTimeInMs: z.number().int().min(0).default(1_000),
    /**
     * The group coordinator declares a silent member dead after this long; until then a crashed
     * router's partitions wait. kafkajs's default is 30 s; 10 s (heartbeats every second) halves the
     * recovery after a kill -9 measured by the chaos run.
     */
    sessionTimeoutMs: z.number().int().min(3_000).max(300_000).default(10_000),
    /** A new group starts at the beginning: the inbox makes re-reading harmless, skipping would lose events. */
    fromBeginning: z.boolean().default(true),
    poolSize: z.number().int().min(1).max(200).optional(),
    /**
     * Lanes per partition: records of different keys run side by side, each key in offset order
     * (hash of the key → lane). 1 = strictly one record after another per partition.
     */
    lanes: z.number().int().min(1).max(64).default(1),
    /** Consecutive records applied in one inbox transaction (a failing one splits the chunk). 1 = one per record. */
    maxTransactionRecords: z.number().int().min(1).max(1_000).default(500),
    /** What to do with a record still failing after maxAttempts, per aggregate type (default: defaultPolicy). */
    policies: z.record(z.string(), z.enum(['dead-letter', 'block'])).default({}),
    defaultPolicy: z.enum(['dead-letter', 'block']).default('dead-letter'),
    /** An event type with no handler: dead-letter (default), skip (count it and move on) or block (hold the partition). */
    unknownEventType: z.enum(UNKNOWN_EVENT_TYPE_POLICIES).default('dead-letter'),
    /** Per aggregate type, overriding unknownEventType. */
    unknownEventTypes: z.record(z.string(), z.enum(UNKNOWN_EVENT_TYPE_POLICIES)).default({}),
    /** Dead-letter topics the router creates: retention (-1: forever; the DLQ is the only copy of a dead letter). */
    dlqRetentionMs: z.number().int().min(-1).default(-1),
    /**
     * Replication factor of the dead-letter topics it creates; unset: min(3, brokers) (src/topics/replication.ts),
     * so 1 on the one-broker local stack and 3 on a production cluster.
     */
    dlqReplicationFactor: z.number().int().min(1).max(32).optional(),
    /** Their min.insync.replicas; unset: 2 on a cluster of 3+ brokers, else the broker's default. */
    dlqMinInsyncReplicas: z.number().int().min(1).max(32).optional(),
    /** A handler running longer fails its attempt; its connection is closed, cancelling the statement. 0: no limit. */
    handlerTimeoutMs: z.number().int().min(0).default(30_000),
    /**
     * How often the topic list is checked for new topics matching an explicit `topics` pattern (subscribed
     * without a restart); the default's topics (the handlers' aggregate types) are looked for every second
     * while one is missing. 0: never.
     */
    topicRefreshMs: z.number().int().min(0).default(10_000),
    /** Park a key after a dead letter so its later events follow it to the DLQ until replayed (per-key order). */
    parkKeys: z.boolean().default(true),
    /**
     * The consumer's reader schemas, `<aggregate_type>/<EventType>.avsc`: Avro payloads are decoded with
     * them, so older records gain the defaults of fields added since. No default: without it (or the
     * handlers module's `schemas` export) Avro is read with the writer's schema.
     */
    schemasDir: z.string().min(1).optional(),
    /**
     * Inbox rows of this consumer older than this are deleted (docs/operations.md, "Inbox retention"). 0:
     * never. At least the source topics' retention.ms + segment.ms plus dlqReplayHorizonMs, checked at start.
     */
    inboxRetentionMs: z.number().int().min(0).default(30 * 24 * 60 * 60 * 1000),
    /** How long after an event was applied its dead letter may still be replayed with `dlq:replay --all` (part of the safe minimum). */
    dlqReplayHorizonMs: z.number().int().min(0).default(7 * 24 * 60 * 60 * 1000),
    /** Start even when inboxRetentionMs is below the safe minimum (a redelivery older than it is applied twice). */
    allowShortInboxRetention: z.boolean().default(false),
    /** How often the router prunes its inbox (one run deletes in batches until none is left or the run's cap). */
    inboxPruneIntervalMs: z.number().int().min(1_000).default(60_000),
    /** Inbox rows per DELETE statement, so a prune never holds many locks or one long transaction. */
    inboxPruneBatchSize: z.number().int().min(1).max(100_000).default(5_000),
    /**
     * 0 (default): the inbox is one table, pruned by DELETE. Otherwise the width of the time partitions of
     * a partitioned inbox (docs/inbox-partitions.md; `outbox inbox:partition` converts one): the router adds
     * them ahead and drops whole partitions past inboxRetentionMs instead of deleting their rows.
     */
    inboxPartitionIntervalMs: z.number().int().min(0).default(0).refine((v) => v === 0 || v >= 60_000, 'inboxPartitionIntervalMs must be 0 (no partitions) or at least 60000 (one minute); one day (86400000) suits most inboxes'),
    /** Time partitions kept ready beyond the current one. */
    inboxPartitionsAhead: z.number().int().min(1).max(100).default(3),
    /** How long a partition drop waits for its locks before it gives up until the next run (inserts queue behind a waiting drop at most this long). */
    inboxPartitionLockTimeoutMs: z.number().int().min(10).max(60_000).default(200),
    /** How often the parked-key gauges are read (one grouped query). 0: never. */
    parkedMetricsIntervalMs: z.number().int().min(0).default(30_000),
    /**
     * A record naming a schema id the registry does not know waits this long, then is dead-lettered
     * (SCHEMA_ID_UNKNOWN) if the registry still resolves an id the router read before. A registry that
     * resolves nothing keeps the router waiting. 0: wait for ever.
     */
    unknownSchemaIdWaitMs: z.number().int().min(0).default(60_000),
    /** Where the event id, type and content type are, and which converter wrote the value (adopting a Debezium outbox). */
    envelope: envelopeSchema,
  })
  .strict();

/** The keys of routerSettingsSchema: what of `config.router` createRouter reads. */
export const ROUTER_SETTING_KEYS = Object.keys(routerSettingsSchema.shape) as ReadonlyArray<keyof z.input<typeof routerSettingsSchema>>;

/** `router` of the root config: the router's settings, plus what only `outbox router` uses. */
export const routerSchema = routerSettingsSchema
  .extend({
    /** `outbox router`: the handlers module (a .js or .mjs file; its default export is the handlers map). */
    handlers: z.string().min(1).optional(),
    /** `outbox router`: routed topics to consume, a regular expression (default: the routed topics of the handlers' aggregate types). */
    topics: z.string().min(1).optional(),
    /** `outbox router`'s /metrics, /livez, /readyz and /healthz. */
    metricsPort: z.number().int().min(0).max(65535).default(STACK_PORTS.routerMetrics),
    metricsHost: z.string().min(1).default(STACK_HOST),
  })
  .strict();

export type RouterConfig = z.output<typeof routerSchema>;

/** Environment variables that feed `router.*` settings (merged into ENV_SETTINGS). */
export const ROUTER_ENV_SETTINGS: ReadonlyArray<EnvSetting> = [
  { env: 'OUTBOX_ROUTER_HANDLERS', path: ['router', 'handlers'] },
  { env: 'OUTBOX_ROUTER_CONSUMER', path: ['router', 'consumer'] },
  { env: 'OUTBOX_ROUTER_GROUP_ID', path: ['router', 'groupId'] },
  { env: 'OUTBOX_ROUTER_ALLOW_GROUP_ID_MISMATCH', path: ['router', 'allowGroupIdMismatch'] },
  { env: 'OUTBOX_ROUTER_TOPICS', path: ['router', 'topics'] },
  { env: 'OUTBOX_ROUTER_MAX_ATTEMPTS', path: ['router', 'maxAttempts'] },
  { env: 'OUTBOX_ROUTER_PARTITIONS', path: ['router', 'partitionsConsumedConcurrently'] },
  { env: 'OUTBOX_ROUTER_LANES', path: ['router', 'lanes'] },
  { env: 'OUTBOX_ROUTER_MAX_TRANSACTION_RECORDS', path: ['router', 'maxTransactionRecords'] },
  { env: 'OUTBOX_ROUTER_UNKNOWN_EVENT_TYPE', path: ['router', 'unknownEventType'] },
  { env: 'OUTBOX_ROUTER_DLQ_RETENTION_MS', path: ['router', 'dlqRetentionMs'] },
  { env: 'OUTBOX_ROUTER_DLQ_REPLICATION_FACTOR', path: ['router', 'dlqReplicationFactor'] },
  { env: 'OUTBOX_ROUTER_DLQ_MIN_INSYNC_REPLICAS', path: ['router', 'dlqMinInsyncReplicas'] },
  { env: 'OUTBOX_ROUTER_HANDLER_TIMEOUT_MS', path: ['router', 'handlerTimeoutMs'] },
  { env: 'OUTBOX_ROUTER_SESSION_TIMEOUT_MS', path: ['router', 'sessionTimeoutMs'] },
  { env: 'OUTBOX_ROUTER_TOPIC_REFRESH_MS', path: ['router', 'topicRefreshMs'] },
  { env: 'OUTBOX_ROUTER_POOL_SIZE', path: ['router', 'poolSize'] },
  { env: 'OUTBOX_ROUTER_METRICS_PORT', path: ['router', 'metricsPort'] },
  { env: 'OUTBOX_ROUTER_METRICS_HOST', path: ['router', 'metricsHost'] },
  { env: 'OUTBOX_ROUTER_SCHEMAS_DIR', path: ['router', 'schemasDir'] },
  { env: 'OUTBOX_ROUTER_INBOX_RETENTION_MS', path: ['router', 'inboxRetentionMs'] },
  { env: 'OUTBOX_ROUTER_DLQ_REPLAY_HORIZON_MS', path: ['router', 'dlqReplayHorizonMs'] },
  { env: 'OUTBOX_ROUTER_ALLOW_SHORT_INBOX_RETENTION', path: ['router', 'allowShortInboxRetention'] },
  { env: 'OUTBOX_ROUTER_INBOX_PRUNE_INTERVAL_MS', path: ['router', 'inboxPruneIntervalMs'] },
  { env: 'OUTBOX_ROUTER_INBOX_PRUNE_BATCH_SIZE', path: ['router', 'inboxPruneBatchSize'] },
  { env: 'OUTBOX_ROUTER_INBOX_PARTITION_INTERVAL_MS', path: ['router', 'inboxPartitionIntervalMs'] },
  { env: 'OUTBOX_ROUTER_INBOX_PARTITIONS_AHEAD', path: ['router', 'inboxPartitionsAhead'] },
  { env: 'OUTBOX_ROUTER_INBOX_PARTITION_LOCK_TIMEOUT_MS', path: ['router', 'inboxPartitionLockTimeoutMs'] },
  { env: 'OUTBOX_ROUTER_PARKED_METRICS_INTERVAL_MS', path: ['router', 'parkedMetricsIntervalMs'] },
  { env: 'OUTBOX_ROUTER_UNKNOWN_SCHEMA_ID_WAIT_MS', path: ['router', 'unknownSchemaIdWaitMs'] },
  { env: 'OUTBOX_ROUTER_ENVELOPE_DEFAULT_CONTENT_TYPE', path: ['router', 'envelope', 'defaultContentType'] },
  { env: 'OUTBOX_ROUTER_ENVELOPE_VALUE_FORMAT', path: ['router', 'envelope', 'valueFormat'] },
  { env: 'OUTBOX_ROUTER_ENVELOPE_ID_HEADER', path: ['router', 'envelope', 'idHeader'] },
  { env: 'OUTBOX_ROUTER_ENVELOPE_EVENT_TYPE_HEADER', path: ['router', 'envelope', 'eventTypeHeader'] },
  { env: 'OUTBOX_ROUTER_ENVELOPE_EVENT_TYPE_FIELD', path: ['router', 'envelope', 'eventTypeField'] },
];
