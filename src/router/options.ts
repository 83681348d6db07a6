import type { Kafka } from 'kafkajs';
import type { Pool } from 'pg';
import { z } from 'zod';
import type { Codec } from '../codec';
import { isLocalStackDatabase, type OutboxConfig } from '../config';
import { OutboxError } from '../errors';
import type { Logger } from '../log';
import type { BackoffSettings } from '../retry';
import type { PayloadSchemas } from './record-context';
import type { Handlers, RouterEventListener } from './types';

export const UNKNOWN_EVENT_TYPE_POLICIES = ['dead-letter', 'skip', 'block'] as const;
export type UnknownEventTypePolicy = (typeof UNKNOWN_EVENT_TYPE_POLICIES)[number];

/** The consumer name on the local stack when none is given (and the CLI's documented default there). */
export const LOCAL_STACK_CONSUMER = 'outbox-router';

/**
 * The inbox's consumer name: the one given, or on the local stack only, LOCAL_STACK_CONSUMER. Elsewhere a
 * missing name is refused: two services that both kept a default would share one inbox and one group.
 * The router and the DLQ commands (which find a consumer's parked keys by it) use the same rule.
 */
export function consumerName(config: Pick<OutboxConfig, 'database'>, given: string | undefined): string {
  if (given !== undefined) return given;
  if (isLocalStackDatabase(config.database)) return LOCAL_STACK_CONSUMER;
  throw new OutboxError(
    'CONFIG_INVALID',
    `The router needs a consumer name for the database at ${config.database.host}:${config.database.port} (only the local stack gets the default ${JSON.stringify(LOCAL_STACK_CONSUMER)}). ` +
      'The name keys the inbox and is the Kafka group id: two services that both kept the default would share them and dead-letter each other\'s event types. ' +
      'Pass consumer (--consumer <service-name>), the same for every replica of one service.',
  );
}

/** Scalar settings, validated once; defaults live here. */
const settingsSchema = z
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
    backoff: z.object({ initialDelayMs: z.number().int().min(0).default(200), maxDelayMs: z.number().int().min(0).default(30_000) }).prefault({}),
    infrastructureBackoff: z.object({ initialDelayMs: z.number().int().min(0).default(500), maxDelayMs: z.number().int().min(0).default(30_000) }).prefault({}),
    /** Partitions handled at once; records of one partition are always handled one at a time, in order. */
    partitionsConsumedConcurrently: z.number().int().min(1).max(256).default(4),
    /** kafkajs waits this long for a fetch to fill (its default, 5 s, is a latency floor). */
    maxWaitTimeInMs: z.number().int().min(0).default(50),
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
    /** Replication factor of the dead-letter topics it creates (1 suits the one-broker local stack only). */
    dlqReplicationFactor: z.number().int().min(1).max(32).default(1),
    /** A handler running longer fails its attempt; its connection is closed, cancelling the statement. 0: no limit. */
    handlerTimeoutMs: z.number().int().min(0).default(30_000),
    /** How often the topic list is checked for new routed topics (subscribed without a restart). 0: never. */
    topicRefreshMs: z.number().int().min(0).default(10_000),
    /** Park a key after a dead letter so its later events follow it to the DLQ until replayed (per-key order). */
    parkKeys: z.boolean().default(true),
  })
  .strict();

export type RouterSettings = z.input<typeof settingsSchema>;

export interface RouterOptions extends RouterSettings {
  /** Brokers, database, registry and inbox table come from here. */
  config: OutboxConfig;
  handlers: Handlers;
  /** Topics to consume. Default /^outbox\.event\..+/. Matched at start() and every topicRefreshMs (new topics are subscribed while running). */
  topics?: RegExp;
  aggregateTypeOf?: (topic: string) => string;
  dlqTopicFor?: (topic: string, aggregateType: string) => string;
  codec?: Pick<Codec, 'decode'>;
  /** Optional zod schema per aggregate type and event type; a payload failing it is dead-lettered (PAYLOAD_INVALID). */
  payloadSchemas?: PayloadSchemas;
  /** An existing pool (not ended by stop()); by default the router opens and closes its own. */
  pool?: Pool;
  kafka?: Kafka;
  logger?: Logger;
  onEvent?: RouterEventListener;
  /** Tests: deterministic jitter. */
  random?: () => number;
}

export interface ResolvedSettings {
  consumer: string;
  groupId: string;
  maxAttempts: number;
  backoff: BackoffSettings;
  infrastructureBackoff: BackoffSettings;
  partitionsConsumedConcurrently: number;
  maxWaitTimeInMs: number;
  sessionTimeoutMs: number;
  fromBeginning: boolean;
  poolSize: number;
  lanes: number;
  maxTransactionRecords: number;
  policies: Readonly<Record<string, 'dead-letter' | 'block'>>;
  defaultPolicy: 'dead-letter' | 'block';
  unknownEventType: UnknownEventTypePolicy;
  unknownEventTypes: Readonly<Record<string, UnknownEventTypePolicy>>;
  dlqRetentionMs: number;
  dlqReplicationFactor: number;
  allowGroupIdMismatch: boolean;
  handlerTimeoutMs: number;
  topicRefreshMs: number;
  parkKeys: boolean;
}

export function resolveSettings(options: RouterOptions): Readonly<ResolvedSettings> {
  const { config: _c, handlers, topics: _t, aggregateTypeOf: _a, dlqTopicFor: _d, codec: _co, payloadSchemas: _ps, pool: _p, kafka: _k, logger: _l, onEvent: _o, random: _r, ...scalars } = options;
  const parsed = settingsSchema.safeParse(scalars);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(options)'}: ${i.message}`);
    throw new OutboxError('CONFIG_INVALID', `Invalid router options:\n${problems.map((p) => `  - ${p}`).join('\n')}`, { details: { problems } });
  }
  const problems = handlerProblems(handlers);
  if (problems.length > 0) {
    throw new OutboxError('CONFIG_INVALID', `createRouter needs handlers: ${HANDLERS_SHAPE}; ${problems.join(', ')}.`, { details: { problems } });
  }
  const s = parsed.data;
  const consumer = consumerName(options.config, s.consumer);
  const groupId = s.groupId ?? consumer;
  if (groupId !== consumer && !s.allowGroupIdMismatch) {
    throw new OutboxError(
      'CONFIG_INVALID',
      `groupId ${JSON.stringify(groupId)} differs from consumer ${JSON.stringify(consumer)}. The inbox is keyed by consumer: routers in different groups with one consumer ` +
        'name each receive every record and skip each other\'s as duplicates, and one group with two consumer names applies records twice. ' +
        'Drop groupId (it defaults to consumer), or pass allowGroupIdMismatch: true (--allow-group-id-mismatch) if that is what you mean.',
    );
  }
  return Object.freeze({
    ...s,
    consumer,
    groupId,
    poolSize: s.poolSize ?? s.partitionsConsumedConcurrently * s.lanes + 2,
  });
}

/** The shape of a handlers module, for error messages. */
export const HANDLERS_SHAPE = '{ <aggregateType>: { <EventType>: async (event, ctx) => … or { batch: async (events, ctx) => … } } }';

/** What is wrong with a handlers object (empty: nothing). */
export function handlerProblems(handlers: unknown): string[] {
  if (!handlers || typeof handlers !== 'object' || Object.keys(handlers).length === 0) return ['there are none'];
  return Object.entries(handlers).flatMap(([aggregate, byType]) =>
    typeof byType !== 'object' || byType === null
      ? [`${aggregate}: not a map of event type → handler`]
      : Object.entries(byType as Record<string, unknown>)
          .filter(([, h]) => typeof h !== 'function' && typeof (h as { batch?: unknown } | null)?.batch !== 'function')
          .map(([type, h]) => `${aggregate}.${type}: a ${h === null ? 'null' : typeof h}, neither a function nor { batch: function }`),
  );
}
