import type { Kafka } from 'kafkajs';
import type { Pool } from 'pg';
import type { z } from 'zod';
import type { EventMapShape, ReaderSchemas } from '../codec';
import { isLocalStackDatabase, parse, type OutboxConfig } from '../config';
import { ROUTER_SETTING_KEYS, routerSettingsSchema, UNKNOWN_EVENT_TYPE_POLICIES, type UnknownEventTypePolicy } from '../config/router-schema';
import { OutboxError } from '../errors';
import type { EnvelopeSettings } from '../envelope';
import type { Logger } from '../log';
import type { BackoffSettings } from '../retry';
import type { PayloadSchemas, RouterCodec } from './record-context';
import type { Handlers, RouterEventListener } from './types';

export { UNKNOWN_EVENT_TYPE_POLICIES, type UnknownEventTypePolicy };

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
    'CONSUMER_NAME_REQUIRED',
    `The router needs a consumer name for the database at ${config.database.host}:${config.database.port} (only the local stack gets the default ${JSON.stringify(LOCAL_STACK_CONSUMER)}). ` +
      'The name keys the inbox and is the Kafka group id: two services that both kept the default would share them and dead-letter each other\'s event types. ' +
      'Pass consumer (--consumer <service-name>), the same for every replica of one service.',
  );
}

/** Scalar settings, validated once; defaults live in the schema (src/config/router-schema.ts). */
export type RouterSettings = z.input<typeof routerSettingsSchema>;

/** M: a generated EventMap, which types `handlers` (docs/library.md, "Typed events"); by default untyped. */
export interface RouterOptions<M extends EventMapShape = EventMapShape> extends RouterSettings {
  /** Brokers, database, registry and inbox table come from here. */
  config: OutboxConfig;
  handlers: Handlers<M>;
  /**
   * Topics to consume, matched at start() and every topicRefreshMs (new topics are subscribed while
   * running). Default: exactly the routed topics of the aggregate types `handlers` names (through
   * connector.topicReplacement: `outbox.event.<type>`), looked for every second while one is missing.
   */
  topics?: RegExp;
  /**
   * The topic templates (connector.topicReplacement) of every outbox this router consumes, when it reads
   * several (docs/multi-outbox.md): the default topics are each template's topics of the handlers' types,
   * and a topic's aggregate type and dead-letter topic come from the template that names it. Default:
   * `[config.connector.topicReplacement]`. Avro reader schemas are named by the first.
   */
  topicReplacements?: readonly string[];
  aggregateTypeOf?: (topic: string) => string;
  dlqTopicFor?: (topic: string, aggregateType: string) => string;
  codec?: RouterCodec;
  /**
   * Reader schemas (aggregate type → event type → Avro schema) that take precedence over `schemasDir`'s:
   * Avro payloads are decoded with the consumer's schema, not only the writer's (docs/schemas.md).
   */
  readerSchemas?: ReaderSchemas;
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
  /** Unset: the replication rule decides (src/topics/replication.ts). */
  dlqReplicationFactor?: number;
  dlqMinInsyncReplicas?: number;
  allowGroupIdMismatch: boolean;
  handlerTimeoutMs: number;
  topicRefreshMs: number;
  parkKeys: boolean;
  schemasDir?: string;
  inboxRetentionMs: number;
  dlqReplayHorizonMs: number;
  allowShortInboxRetention: boolean;
  inboxPruneIntervalMs: number;
  inboxPruneBatchSize: number;
  inboxPartitionIntervalMs: number;
  inboxPartitionsAhead: number;
  inboxPartitionLockTimeoutMs: number;
  parkedMetricsIntervalMs: number;
  unknownSchemaIdWaitMs: number;
  /** `router.envelope`: where the id, type and content type are, and the value's converter. */
  envelope: Readonly<EnvelopeSettings>;
}

/** What createRouter takes that is not a setting (objects and functions). */
const OBJECT_OPTIONS = new Set(['config', 'handlers', 'topics', 'topicReplacements', 'aggregateTypeOf', 'dlqTopicFor', 'codec', 'readerSchemas', 'payloadSchemas', 'pool', 'kafka', 'logger', 'onEvent', 'random']);

/**
 * `config.router`'s settings, each overridden by the one given to createRouter; keys that are neither
 * are kept, so the strict schema names them.
 */
function settingsInput(options: RouterOptions): Record<string, unknown> {
  const fromConfig = (options.config.router ?? {}) as Record<string, unknown>;
  const given = Object.entries(options).filter(([key, value]) => !OBJECT_OPTIONS.has(key) && value !== undefined);
  const input: Record<string, unknown> = {};
  for (const key of ROUTER_SETTING_KEYS) if (fromConfig[key] !== undefined) input[key] = fromConfig[key];
  return { ...input, ...Object.fromEntries(given) };
}

export function resolveSettings(options: RouterOptions): Readonly<ResolvedSettings> {
  const { handlers } = options;
  const s = parse(routerSettingsSchema, settingsInput(options), { heading: 'Invalid router options', hideValues: true, code: 'FLAG_INVALID' });
  const problems = handlerProblems(handlers);
  if (problems.length > 0) {
    throw new OutboxError('HANDLERS_INVALID', `createRouter needs handlers: ${HANDLERS_SHAPE}; ${problems.join(', ')}.`, { details: { problems } });
  }
  if (s.maxWaitTimeInMs * 3 > s.sessionTimeoutMs) {
    // kafkajs heartbeats between fetches: an idle fetch that waits this long delays the heartbeat as much.
    throw new OutboxError(
      'FLAG_INVALID',
      `router.maxWaitTimeInMs (${s.maxWaitTimeInMs}) must be at most a third of router.sessionTimeoutMs (${s.sessionTimeoutMs}): an idle fetch holds the heartbeat back that long, ` +
        'and the group would count the router dead. Lower maxWaitTimeInMs or raise sessionTimeoutMs.',
    );
  }
  const consumer = consumerName(options.config, s.consumer);
  const groupId = s.groupId ?? consumer;
  if (groupId !== consumer && !s.allowGroupIdMismatch) {
    throw new OutboxError(
      'GROUP_ID_MISMATCH',
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
