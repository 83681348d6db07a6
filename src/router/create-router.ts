import { Partitioners, type Admin, type Consumer, type EachBatchPayload, type Producer } from 'kafkajs';
import type { Pool } from 'pg';
import { createCodec } from '../codec';
import { createPool, qualified } from '../db';
import { createKafka } from '../kafka';
import { parkedTableName } from '../provision/sql-files';
import { backoffDelay, sleepUnlessAborted } from '../retry';
import { createLogger } from '../log';
import { resolveSettings, type RouterOptions } from './options';
import { ParkedKeys } from './parked';
import { runPartitionBatch } from './partition-batch';
import type { RecordDeps } from './process-record';
import { DEFAULT_TOPICS, defaultAggregateTypeOf, defaultDlqTopicFor } from './topics';
import type { RouterEventName, RouterStats } from './types';

export interface Router {
  /** Joins the group and starts consuming; resolves once the consumer runs. */
  start(): Promise<void>;
  /** Finishes the record in hand (a retry wait is cut short, the record left for the next run), commits offsets, leaves the group. */
  stop(): Promise<void>;
  stats(): Readonly<RouterStats>;
  /** For /healthz: started, and a member of its consumer group. */
  health(): { running: boolean; joined: boolean };
}

/**
 * Routed topics → handlers, exactly once in effect (DESIGN.md, "router").
 *
 * Why eachBatch with manual resolveOffset: a record's offset is resolved only after its inbox
 * transaction has committed (or its dead letter is written), so a crash anywhere before leaves the
 * record to be redelivered, and the inbox turns the redelivery into a counted duplicate. kafkajs's
 * autoCommit then commits the resolved offsets after every batch (and every second inside a long one),
 * and once more when stop() drains the batch in hand. Partitions run side by side
 * (`partitionsConsumedConcurrently`); inside one, records run in offset order, or in `lanes` by key
 * hash with each key in order; consecutive records share an inbox transaction (`maxTransactionRecords`).
 */
const WARN_EVENTS = new Set<RouterEventName>(['router.dead-letter', 'router.wait', 'router.blocked', 'router.chunk-split']);
const INFO_EVENTS = new Set<RouterEventName>(['router.retry', 'router.unblocked', 'router.skipped', 'router.topics-changed']);

export function createRouter(options: RouterOptions): Router {
  const settings = resolveSettings(options);
  const { config } = options;
  const logger = options.logger ?? createLogger({ name: 'router' });
  const kafka =
    options.kafka ??
    createKafka(config, { logger });
  const stats: RouterStats = { received: 0, applied: 0, duplicates: 0, retries: 0, deadLettered: 0, skipped: 0, infrastructureRetries: 0 };
  const emit = (name: RouterEventName, data: Record<string, unknown>) => {
    try {
      const level = WARN_EVENTS.has(name) ? 'warn' : INFO_EVENTS.has(name) ? 'info' : 'debug';
      logger[level]({ event: name, ...data }, name);
      options.onEvent?.(name, data);
    } catch {
      // Observers never break the router.
    }
  };

  let consumer: Consumer | undefined;
  let producer: Producer | undefined;
  let pool: Pool | undefined;
  let abort = new AbortController();
  let state: 'idle' | 'running' | 'stopping' = 'idle';
  /** In a consumer group with partitions assigned (false after a crash until kafkajs rejoins). */
  let joined = false;

  const parkedTable = qualified(config.outbox.schema, parkedTableName(config.outbox.inboxTable));

  async function eachBatch(payload: EachBatchPayload): Promise<void> {
    const { batch, resolveOffset, heartbeat, commitOffsetsIfNecessary, isRunning, isStale } = payload;
    const aggregateTypeOf = options.aggregateTypeOf ?? defaultAggregateTypeOf;
    const deps: RecordDeps = {
      handlers: options.handlers,
      codec: options.codec ?? codec,
      pool: pool as Pool,
      inboxTable: qualified(config.outbox.schema, config.outbox.inboxTable),
      consumer: settings.consumer,
      maxAttempts: settings.maxAttempts,
      backoff: settings.backoff,
      infrastructureBackoff: settings.infrastructureBackoff,
      aggregateTypeOf,
      dlqTopicFor: options.dlqTopicFor ?? defaultDlqTopicFor,
      sendDeadLetter: async (topic, message) => {
        await (producer as Producer).send({ topic, acks: -1, messages: [message] });
      },
      heartbeat,
      signal: abort.signal,
      stats,
      emit,
      random: options.random,
      policyFor: (aggregateType) => settings.policies[aggregateType] ?? settings.defaultPolicy,
      unknownEventType: settings.unknownEventType,
      handlerTimeoutMs: settings.handlerTimeoutMs || undefined,
      payloadSchemas: options.payloadSchemas,
    };
    const stopped = () => !isRunning() || isStale() || abort.signal.aborted;
    if (settings.parkKeys) {
      const keys = batch.messages.map((m) => (m.key ? m.key.toString('utf8') : ''));
      for (let wait = 1; ; wait++) {
        try {
          deps.parked = await ParkedKeys.load(deps.pool, parkedTable, settings.consumer, aggregateTypeOf(batch.topic), keys);
          break;
        } catch (error) {
          stats.infrastructureRetries++;
          const delay = backoffDelay(wait, settings.infrastructureBackoff, options.random);
          emit('router.wait', { topic: batch.topic, partition: batch.partition, error: (error as Error).message, delayMs: delay });
          if (!(await sleepUnlessAborted(delay, abort.signal)) || stopped()) return;
        }
      }
    }
    const last = await runPartitionBatch(batch.topic, batch.partition, batch.messages, deps, {
      lanes: settings.lanes,
      maxTransactionRecords: settings.maxTransactionRecords,
      resolveOffset,
      progress: async () => {
        await commitOffsetsIfNecessary();
        await heartbeat();
      },
      stopped,
    });
    // Records behind the high watermark once this batch is done (the consumer-lag gauge).
    const position = last ?? (batch.messages.length > 0 ? String(BigInt((batch.messages[0] as { offset: string }).offset) - 1n) : undefined);
    if (position !== undefined) {
      emit('router.lag', { topic: batch.topic, partition: batch.partition, lag: Math.max(0, Number(BigInt(batch.highWatermark) - BigInt(position) - 1n)) });
    }
  }

  const codec = options.codec ?? createCodec({ registry: config.registry });

  const topicPattern = options.topics ?? DEFAULT_TOPICS;
  let subscribed = new Set<string>();
  let refreshTimer: NodeJS.Timeout | undefined;
  let admin: Admin | undefined;

  async function matchingTopics(): Promise<Set<string>> {
    const all = await (admin as Admin).listTopics();
    return new Set(all.filter((t) => topicPattern.test(t)).sort());
  }

  async function startConsumer(topics: Set<string>): Promise<void> {
    const c = kafka.consumer({
      groupId: settings.groupId,
      maxWaitTimeInMs: settings.maxWaitTimeInMs,
      sessionTimeout: settings.sessionTimeoutMs,
      heartbeatInterval: Math.max(500, Math.floor(settings.sessionTimeoutMs / 10)),
      allowAutoTopicCreation: false,
    });
    consumer = c;
    joined = false;
    c.on(c.events.GROUP_JOIN, () => {
      if (consumer === c) joined = true;
    });
    c.on(c.events.CRASH, (e) => {
      // kafkajs restarts itself after a retriable crash; until it rejoins, the router is not healthy.
      if (consumer === c) joined = false;
      logger.error({ event: 'router.crash', error: e.payload.error?.message, restart: e.payload.restart }, 'router.crash');
    });
    c.on(c.events.STOP, () => {
      if (consumer === c) joined = false;
    });
    await c.connect();
    subscribed = topics;
    // An explicit list, not the pattern: kafkajs resolves a pattern once, at subscribe. New topics are
    // found by refreshTopics() and picked up by re-subscribing (a short rebalance, no restart).
    if (topics.size > 0) await c.subscribe({ topics: [...topics], fromBeginning: settings.fromBeginning });
    if (topics.size > 0) {
      await c.run({
        eachBatchAutoResolve: false,
        autoCommit: true,
        autoCommitInterval: 1_000,
        partitionsConsumedConcurrently: settings.partitionsConsumedConcurrently,
        eachBatch,
      });
    } else {
      logger.warn({ event: 'router.no-topics', pattern: String(topicPattern) }, 'no routed topics yet; waiting for the first one');
    }
  }

  let refreshing = false;
  async function refreshTopics(): Promise<void> {
    if (refreshing || state !== 'running') return;
    refreshing = true;
    try {
      const now = await matchingTopics();
      const added = [...now].filter((t) => !subscribed.has(t));
      if (added.length === 0 || state !== 'running') return;
      emit('router.topics-changed', { added, topics: now.size });
      const old = consumer;
      consumer = undefined;
      // Finishes the batch in hand and commits its offsets before the new subscription joins.
      await old?.disconnect().catch((e: Error) => logger.warn({ error: e.message }, 'router: consumer disconnect before re-subscribe failed'));
      if (state === 'running') await startConsumer(now);
    } catch (error) {
      logger.warn({ event: 'router.topics-refresh-failed', error: (error as Error).message }, 'router: could not refresh the topic list; will try again');
    } finally {
      refreshing = false;
    }
  }

  return {
    async start() {
      if (state !== 'idle') throw new Error(`router.start(): the router is ${state}`);
      state = 'running';
      abort = new AbortController();
      pool = options.pool ?? createPool(config.database, { application_name: `outbox-router:${settings.consumer}`, max: settings.poolSize }, (error) => logger.warn({ err: error.message }, 'router.db-idle-error'));
      // Not idempotent (kafkajs wants endless retries for that): a rare duplicate dead letter is harmless,
      // since a replayed one goes through the inbox again.
      producer = kafka.producer({ allowAutoTopicCreation: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner });
      admin = kafka.admin();
      try {
        await producer.connect();
        await admin.connect();
        await startConsumer(await matchingTopics());
      } catch (error) {
        await this.stop();
        throw error;
      }
      if (settings.topicRefreshMs > 0) {
        refreshTimer = setInterval(() => void refreshTopics(), settings.topicRefreshMs);
        refreshTimer.unref();
      }
      logger.info({ event: 'router.started', consumer: settings.consumer, groupId: settings.groupId, topics: [...subscribed] }, 'router.started');
    },

    async stop() {
      if (state !== 'running') return;
      state = 'stopping';
      clearInterval(refreshTimer);
      // Cuts retry waits short; the record in hand is not resolved, so it is redelivered next time.
      abort.abort();
      while (refreshing) await new Promise((r) => setTimeout(r, 20));
      // kafkajs's disconnect waits for the batch in hand, commits resolved offsets and leaves the group.
      await consumer?.disconnect().catch((e: Error) => logger.warn({ error: e.message }, 'router.stop: consumer disconnect failed'));
      await producer?.disconnect().catch(() => {});
      await admin?.disconnect().catch(() => {});
      if (!options.pool) await pool?.end().catch(() => {});
      consumer = producer = pool = admin = undefined;
      state = 'idle';
      logger.info({ event: 'router.stopped', ...stats }, 'router.stopped');
    },

    stats: () => ({ ...stats }),

    health: () => ({ running: state === 'running', joined: state === 'running' && (joined || subscribed.size === 0) }),
  };
}
