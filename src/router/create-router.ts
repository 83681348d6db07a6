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
import { linkedAbort, runPartitionBatch } from './partition-batch';
import type { BatchScope, RouterDeps } from './record-context';
import { assertNotDlqPattern, DEFAULT_TOPICS, defaultAggregateTypeOf, defaultDlqTopicFor, isDlqTopic } from './topics';
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
 * Routed topics → handlers, exactly once in effect (docs/router.md).
 *
 * Why eachBatch with manual resolveOffset: a record's offset is resolved only after its inbox
 * transaction has committed (or its dead letter is written), so a crash anywhere before leaves the
 * record to be redelivered, and the inbox turns the redelivery into a counted duplicate. Resolved
 * offsets are committed off the critical path: at most every COMMIT_INTERVAL_MS (between chunks, and by
 * a timer when the stream is idle), and at once when a batch ends revoked or stopping and when stop()
 * begins. Not kafkajs's autoCommit: it commits after every batch, a round trip to the coordinator
 * before the next fetch. Partitions run side by side
 * (`partitionsConsumedConcurrently`); inside one, records run in offset order, or in `lanes` by key
 * hash with each key in order; consecutive records share an inbox transaction (`maxTransactionRecords`).
 */
const WARN_EVENTS = new Set<RouterEventName>(['router.dead-letter', 'router.wait', 'router.blocked', 'router.chunk-split']);
const INFO_EVENTS = new Set<RouterEventName>(['router.retry', 'router.unblocked', 'router.skipped', 'router.topics-changed', 'router.group-join', 'router.revoked']);

/** kafkajs's heartbeat errors that mean the group is rebalancing or has moved on without this member. */
const REBALANCE_ERRORS = new Set(['REBALANCE_IN_PROGRESS', 'ILLEGAL_GENERATION', 'UNKNOWN_MEMBER_ID', 'FENCED_INSTANCE_ID']);

/** A batch starts no new record after this long while it is the last one of its fetch (see runPartitionBatch's yieldAfterMs). */
const YIELD_AFTER_MS = 500;

/** Resolved offsets are committed at most this often while records flow (a crash redelivers at most this much). */
const COMMIT_INTERVAL_MS = 1_000;

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
  let recordDeps: RouterDeps | undefined;
  let abort = new AbortController();
  let state: 'idle' | 'running' | 'stopping' = 'idle';
  /** In a consumer group with partitions assigned (false after a crash until kafkajs rejoins). */
  let joined = false;
  /**
   * Commits the consumer's resolved offsets: kafkajs hands its commit out only in a batch's payload, so
   * the latest one is kept (its functions act on the consumer group, not on the batch). `all`: now;
   * otherwise only when COMMIT_INTERVAL_MS has passed since the last commit.
   */
  let committer: ((all: boolean) => Promise<void>) | undefined;
  let commitTimer: NodeJS.Timeout | undefined;
  /** Batches being handled now; when one is left, the other partitions of its fetch wait on it. */
  let batchesInHand = 0;
  const commitOffsets = async (all: boolean) => {
    await committer?.(all).catch((e: Error) => logger.debug({ event: 'router.commit-failed', error: e.message }, 'router: offset commit failed; the next one covers it'));
  };

  const heartbeatIntervalMs = Math.max(500, Math.floor(settings.sessionTimeoutMs / 10));
  const aggregateTypeOf = options.aggregateTypeOf ?? defaultAggregateTypeOf;
  const dlqTopicFor = options.dlqTopicFor ?? defaultDlqTopicFor;
  const parkedTable = qualified(config.outbox.schema, parkedTableName(config.outbox.inboxTable));

  /**
   * kafkajs heartbeats only between batches (no background heartbeat): a chunk of slow handlers would
   * outlive the session timeout and the partition would move while it is still being applied. So a
   * timer heartbeats during the batch (kafkajs throttles it to heartbeatInterval); when the group
   * rebalances, the batch is revoked: no new transaction starts and no offset is resolved.
   */
  async function eachBatch(payload: EachBatchPayload, owner: Consumer): Promise<void> {
    const { batch, heartbeat } = payload;
    const commit = (all: boolean) => (all ? payload.commitOffsetsIfNecessary(payload.uncommittedOffsets()) : payload.commitOffsetsIfNecessary());
    if (consumer === owner) committer = commit;
    const revocation = new AbortController();
    /** Cuts the batch's waits short when the router stops or the partition is revoked. */
    const waits = linkedAbort(abort.signal);
    const revoke = (error: Error) => {
      if (revocation.signal.aborted) return;
      revocation.abort();
      waits.abort();
      emit('router.revoked', { topic: batch.topic, partition: batch.partition, error: error.message });
    };
    const beat = async () => {
      try {
        await heartbeat();
      } catch (error) {
        if (REBALANCE_ERRORS.has((error as { type?: string }).type ?? '')) revoke(error as Error);
        throw error;
      }
    };
    batchesInHand++;
    const timer = setInterval(() => {
      // A consumer being disconnected (stop, or a re-subscribe) waits for this batch: cut a blocked or
      // waiting record short so the disconnect cannot hang on it.
      if (!payload.isRunning() || payload.isStale()) waits.abort();
      void beat().catch(() => {});
    }, heartbeatIntervalMs);
    try {
      await consumeBatch(payload, beat, revocation.signal, waits.signal);
    } finally {
      batchesInHand--;
      clearInterval(timer);
      waits.dispose();
      // The partition goes (a rebalance) or the consumer stops: what this batch finished is committed
      // now, so the next owner does not redeliver it (it would only count duplicates).
      if (revocation.signal.aborted || payload.isStale() || !payload.isRunning() || abort.signal.aborted) {
        await commit(true).catch((e: Error) => logger.debug({ event: 'router.commit-failed', error: e.message }, 'router: offset commit failed; the next owner redelivers (duplicates)'));
      }
    }
  }

  /** Everything a record needs that outlives a batch: built once, when start() has the pool. */
  function routerDeps(db: Pool): RouterDeps {
    return {
      handlers: options.handlers,
      codec: options.codec ?? codec,
      pool: db,
      inboxTable: qualified(config.outbox.schema, config.outbox.inboxTable),
      consumer: settings.consumer,
      maxAttempts: settings.maxAttempts,
      backoff: settings.backoff,
      infrastructureBackoff: settings.infrastructureBackoff,
      aggregateTypeOf,
      dlqTopicFor,
      sendDeadLetter: async (topic, message, source) => {
        // Never auto-created with broker defaults (a finite retention would delete the only copy).
        await ensureDlqs(new Map([[topic, source]]));
        await (producer as Producer).send({ topic, acks: -1, messages: [message] });
      },
      stats,
      emit,
      random: options.random,
      policyFor: (aggregateType) => settings.policies[aggregateType] ?? settings.defaultPolicy,
      unknownEventType: settings.unknownEventType,
      unknownEventTypes: settings.unknownEventTypes,
      handlerTimeoutMs: settings.handlerTimeoutMs || undefined,
      payloadSchemas: options.payloadSchemas,
    };
  }

  async function consumeBatch(payload: EachBatchPayload, heartbeat: () => Promise<void>, revoked: AbortSignal, waits: AbortSignal): Promise<void> {
    const { batch, resolveOffset, commitOffsetsIfNecessary, isRunning, isStale } = payload;
    const deps = recordDeps as RouterDeps;
    const scope: BatchScope = { heartbeat, signal: waits };
    const stopped = () => !isRunning() || isStale() || abort.signal.aborted || revoked.aborted;
    if (settings.parkKeys) {
      const keys = batch.messages.map((m) => (m.key ? m.key.toString('utf8') : ''));
      for (let wait = 1; ; wait++) {
        try {
          scope.parked = await ParkedKeys.load(deps.pool, parkedTable, settings.consumer, aggregateTypeOf(batch.topic), keys);
          break;
        } catch (error) {
          stats.infrastructureRetries++;
          const delay = backoffDelay(wait, settings.infrastructureBackoff, options.random);
          emit('router.wait', { topic: batch.topic, partition: batch.partition, error: (error as Error).message, delayMs: delay });
          if (!(await sleepUnlessAborted(delay, waits)) || stopped()) return;
        }
      }
    }
    const last = await runPartitionBatch(batch.topic, batch.partition, batch.messages, deps, scope, {
      lanes: settings.lanes,
      maxTransactionRecords: settings.maxTransactionRecords,
      resolveOffset,
      // Neither is a round trip unless due: the commit every COMMIT_INTERVAL_MS, the heartbeat every heartbeatInterval.
      progress: async () => {
        await commitOffsetsIfNecessary();
        await heartbeat();
      },
      stopped,
      revoked: () => revoked.aborted || isStale(),
      yieldAfterMs: YIELD_AFTER_MS,
      othersWaiting: () => batchesInHand <= 1,
    });
    // Records behind the high watermark once this batch is done (the consumer-lag gauge).
    const position = last ?? (batch.messages.length > 0 ? String(BigInt((batch.messages[0] as { offset: string }).offset) - 1n) : undefined);
    if (position !== undefined) {
      emit('router.lag', { topic: batch.topic, partition: batch.partition, lag: Math.max(0, Number(BigInt(batch.highWatermark) - BigInt(position) - 1n)) });
    }
  }

  const codec = options.codec ?? createCodec({ registry: config.registry });

  const topicPattern = options.topics ?? DEFAULT_TOPICS;
  // Refused before anything connects; the topics that exist are checked again at start().
  assertNotDlqPattern(topicPattern);
  let subscribed = new Set<string>();
  let refreshTimer: NodeJS.Timeout | undefined;
  let admin: Admin | undefined;

  /** Routed topics matching the pattern. Dead-letter topics are never among them (see assertNotDlqPattern). */
  async function matchingTopics(check: boolean): Promise<Set<string>> {
    const all = await (admin as Admin).listTopics();
    const matches = all.filter((t) => topicPattern.test(t));
    const dlqs = new Set([...all.filter(isDlqTopic), ...matches.map((t) => dlqTopicFor(t, aggregateTypeOf(t)))]);
    if (check) assertNotDlqPattern(topicPattern, [...dlqs]);
    return new Set(matches.filter((t) => !dlqs.has(t)).sort());
  }

  /** Dead-letter topics known to exist (created by this router or found). */
  const dlqTopics = new Set<string>();
  /**
   * Each routed topic's DLQ, created explicitly (idempotently): the DLQ holds the only copy of a dead
   * letter, so it keeps it forever by default (dlqRetentionMs), with dlqReplicationFactor replicas and
   * the source's partition count (a key's dead letters stay in one partition, in order).
   */
  async function ensureDlqTopics(sources: readonly string[]): Promise<void> {
    await ensureDlqs(new Map(sources.map((t) => [dlqTopicFor(t, aggregateTypeOf(t)), t] as const)));
  }

  /** dead-letter topic → its routed (source) topic. */
  async function ensureDlqs(wanted: Map<string, string>): Promise<void> {
    for (const dlq of wanted.keys()) if (dlqTopics.has(dlq)) wanted.delete(dlq);
    if (wanted.size === 0) return;
    const existing = new Set(await (admin as Admin).listTopics());
    for (const dlq of [...wanted.keys()].filter((d) => existing.has(d))) {
      dlqTopics.add(dlq);
      wanted.delete(dlq);
    }
    if (wanted.size === 0) return;
    const { topics } = await (admin as Admin).fetchTopicMetadata({ topics: [...new Set(wanted.values())] });
    const partitionsOf = new Map(topics.map((t) => [t.name, t.partitions.length]));
    // createTopics answers false (no error) for a topic that already exists, e.g. made by another replica.
    await (admin as Admin).createTopics({
      waitForLeaders: true,
      topics: [...wanted].map(([dlq, source]) => ({
        topic: dlq,
        numPartitions: partitionsOf.get(source) ?? 1,
        replicationFactor: settings.dlqReplicationFactor,
        configEntries: [{ name: 'retention.ms', value: String(settings.dlqRetentionMs) }],
      })),
    });
    for (const [dlq, source] of wanted) {
      dlqTopics.add(dlq);
      logger.info({ event: 'router.dlq-created', topic: dlq, source, partitions: partitionsOf.get(source) ?? 1, retentionMs: settings.dlqRetentionMs }, 'router.dlq-created');
    }
  }

  /** A consumer that is connected, subscribed and running (false while a re-subscribe is retried). */
  let consuming = false;

  async function startConsumer(topics: Set<string>): Promise<void> {
    const c = kafka.consumer({
      groupId: settings.groupId,
      maxWaitTimeInMs: settings.maxWaitTimeInMs,
      sessionTimeout: settings.sessionTimeoutMs,
      heartbeatInterval: heartbeatIntervalMs,
      allowAutoTopicCreation: false,
    });
    consumer = c;
    committer = undefined;
    joined = false;
    c.on(c.events.GROUP_JOIN, (e) => {
      if (consumer !== c) return;
      joined = true;
      // A hook for what must follow an assignment (e.g. reloading state for the partitions now owned).
      emit('router.group-join', { groupId: e.payload.groupId, memberId: e.payload.memberId, assignment: e.payload.memberAssignment });
    });
    c.on(c.events.CRASH, (e) => {
      // kafkajs restarts itself after a retriable crash; until it rejoins, the router is not healthy.
      if (consumer === c) joined = false;
      logger.error({ event: 'router.crash', error: e.payload.error?.message, restart: e.payload.restart }, 'router.crash');
    });
    c.on(c.events.STOP, () => {
      if (consumer === c) joined = false;
    });
    try {
      await c.connect();
      // Best effort here; sendDeadLetter makes sure again before the first dead letter.
      await ensureDlqTopics([...topics]).catch((e: Error) => logger.warn({ event: 'router.dlq-create-failed', error: e.message }, 'router: could not create the dead-letter topics yet; will try before the first dead letter'));
      subscribed = topics;
      // An explicit list, not the pattern: kafkajs resolves a pattern once, at subscribe. New topics are
      // found by refreshTopics() and picked up by re-subscribing (a short rebalance, no restart).
      if (topics.size > 0) {
        await c.subscribe({ topics: [...topics], fromBeginning: settings.fromBeginning });
        await c.run({
          eachBatchAutoResolve: false,
          autoCommit: false,
          autoCommitInterval: COMMIT_INTERVAL_MS,
          partitionsConsumedConcurrently: settings.partitionsConsumedConcurrently,
          eachBatch: (payload) => eachBatch(payload, c),
        });
      } else {
        logger.warn({ event: 'router.no-topics', pattern: String(topicPattern) }, 'no routed topics yet; waiting for the first one');
      }
      consuming = true;
    } catch (error) {
      if (consumer === c) consumer = undefined;
      await c.disconnect().catch(() => {});
      throw error;
    }
  }

  let refreshing = false;
  async function refreshTopics(): Promise<void> {
    if (refreshing || state !== 'running') return;
    refreshing = true;
    try {
      const now = await matchingTopics(false);
      const added = [...now].filter((t) => !subscribed.has(t));
      if (added.length === 0 || state !== 'running') return;
      emit('router.topics-changed', { added, topics: now.size });
      const old = consumer;
      consumer = undefined;
      consuming = false;
      // Finishes the batch in hand and commits its offsets before the new subscription joins.
      await commitOffsets(true);
      await old?.disconnect().catch((e: Error) => logger.warn({ error: e.message }, 'router: consumer disconnect before re-subscribe failed'));
      // The old consumer is gone: until a new one runs the router consumes nothing (and says so on
      // /healthz), so this is retried until it works or the router stops.
      for (let attempt = 1; state === 'running'; attempt++) {
        try {
          await startConsumer(now);
          break;
        } catch (error) {
          const delayMs = backoffDelay(attempt, settings.infrastructureBackoff, options.random);
          stats.infrastructureRetries++;
          logger.error({ event: 'router.resubscribe-failed', error: (error as Error).message, attempt, delayMs }, 'router: re-subscribing failed; consuming nothing until it works, retrying');
          if (!(await sleepUnlessAborted(delayMs, abort.signal))) break;
        }
      }
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
      recordDeps = routerDeps(pool);
      // Not idempotent (kafkajs wants endless retries for that): a rare duplicate dead letter is harmless,
      // since a replayed one goes through the inbox again.
      // No auto-creation: DLQ topics are created explicitly with their retention (ensureDlqTopics).
      producer = kafka.producer({ allowAutoTopicCreation: false, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner });
      admin = kafka.admin();
      try {
        await producer.connect();
        await admin.connect();
        await startConsumer(await matchingTopics(true));
      } catch (error) {
        await this.stop();
        throw error;
      }
      // An idle stream brings no batch: what the last one resolved is still committed within the interval.
      commitTimer = setInterval(() => void commitOffsets(false), COMMIT_INTERVAL_MS);
      commitTimer.unref();
      if (settings.topicRefreshMs > 0) {
        refreshTimer = setInterval(() => void refreshTopics(), settings.topicRefreshMs);
        refreshTimer.unref();
      }
      const unknown = [settings.unknownEventType, ...Object.entries(settings.unknownEventTypes).map(([t, p]) => `${t}: ${p}`)].join(', ');
      logger.info(
        {
          event: 'router.started',
          consumer: settings.consumer,
          groupId: settings.groupId,
          topics: [...subscribed],
          unknownEventType: settings.unknownEventType,
          unknownEventTypes: settings.unknownEventTypes,
          dlqRetentionMs: settings.dlqRetentionMs,
        },
        `router.started (event types without a handler: ${unknown})`,
      );
    },

    async stop() {
      if (state !== 'running') return;
      state = 'stopping';
      clearInterval(refreshTimer);
      clearInterval(commitTimer);
      // What is resolved now; the batch in hand commits what it finishes when it ends.
      await commitOffsets(true);
      // Cuts retry waits short; the record in hand is not resolved, so it is redelivered next time.
      abort.abort();
      while (refreshing) await new Promise((r) => setTimeout(r, 20));
      // kafkajs's disconnect waits for the batch in hand, commits resolved offsets and leaves the group.
      await consumer?.disconnect().catch((e: Error) => logger.warn({ error: e.message }, 'router.stop: consumer disconnect failed'));
      await producer?.disconnect().catch(() => {});
      await admin?.disconnect().catch(() => {});
      if (!options.pool) await pool?.end().catch(() => {});
      consumer = producer = pool = admin = recordDeps = committer = undefined;
      consuming = false;
      state = 'idle';
      logger.info({ event: 'router.stopped', ...stats }, 'router.stopped');
    },

    stats: () => ({ ...stats }),

    health: () => ({ running: state === 'running', joined: state === 'running' && consuming && consumer !== undefined && (joined || subscribed.size === 0) }),
  };
}
