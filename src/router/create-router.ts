import { Partitioners, type Consumer, type EachBatchPayload, type Producer } from 'kafkajs';
import type { Pool } from 'pg';
import { createCodec } from '../codec';
import { createPool, qualified } from '../db';
import { createKafka } from '../kafka';
import { createLogger } from '../log';
import { resolveSettings, type RouterOptions } from './options';
import { processRecord, type RecordDeps } from './process-record';
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
 * and once more when stop() drains the batch in hand. Records of a partition run one at a time, in
 * offset order; partitions run side by side (`partitionsConsumedConcurrently`).
 */
export function createRouter(options: RouterOptions): Router {
  const settings = resolveSettings(options);
  const { config } = options;
  const logger = options.logger ?? createLogger({ name: 'router' });
  const kafka =
    options.kafka ??
    createKafka(config, { logger });
  const stats: RouterStats = { received: 0, applied: 0, duplicates: 0, retries: 0, deadLettered: 0, infrastructureRetries: 0 };
  const emit = (name: RouterEventName, data: Record<string, unknown>) => {
    try {
      const level = name === 'router.dead-letter' || name === 'router.wait' ? 'warn' : name === 'router.retry' ? 'info' : 'debug';
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

  async function eachBatch(payload: EachBatchPayload): Promise<void> {
    const { batch, resolveOffset, heartbeat, commitOffsetsIfNecessary, isRunning, isStale } = payload;
    const deps: RecordDeps = {
      handlers: options.handlers,
      codec: options.codec ?? codec,
      pool: pool as Pool,
      inboxTable: qualified(config.outbox.schema, config.outbox.inboxTable),
      consumer: settings.consumer,
      maxAttempts: settings.maxAttempts,
      backoff: settings.backoff,
      infrastructureBackoff: settings.infrastructureBackoff,
      aggregateTypeOf: options.aggregateTypeOf ?? defaultAggregateTypeOf,
      dlqTopicFor: options.dlqTopicFor ?? defaultDlqTopicFor,
      sendDeadLetter: async (topic, message) => {
        await (producer as Producer).send({ topic, acks: -1, messages: [message] });
      },
      heartbeat,
      signal: abort.signal,
      stats,
      emit,
      random: options.random,
    };
    for (const message of batch.messages) {
      if (!isRunning() || isStale() || abort.signal.aborted) break;
      const outcome = await processRecord(batch.topic, batch.partition, message, deps);
      if (outcome === 'aborted') break;
      resolveOffset(message.offset);
      await commitOffsetsIfNecessary();
      await heartbeat();
    }
  }

  const codec = options.codec ?? createCodec({ registry: config.registry });

  return {
    async start() {
      if (state !== 'idle') throw new Error(`router.start(): the router is ${state}`);
      state = 'running';
      abort = new AbortController();
      pool = options.pool ?? createPool(config.database, { application_name: `outbox-router:${settings.consumer}`, max: settings.poolSize }, (error) => logger.warn({ err: error.message }, 'router.db-idle-error'));
      // Not idempotent (kafkajs wants endless retries for that): a rare duplicate dead letter is harmless,
      // since a replayed one goes through the inbox again.
      producer = kafka.producer({ allowAutoTopicCreation: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner });
      consumer = kafka.consumer({ groupId: settings.groupId, maxWaitTimeInMs: settings.maxWaitTimeInMs, allowAutoTopicCreation: false });
      joined = false;
      consumer.on(consumer.events.GROUP_JOIN, () => {
        joined = true;
      });
      consumer.on(consumer.events.CRASH, (e) => {
        // kafkajs restarts itself after a retriable crash; until it rejoins, the router is not healthy.
        joined = false;
        logger.error({ event: 'router.crash', error: e.payload.error?.message, restart: e.payload.restart }, 'router.crash');
      });
      consumer.on(consumer.events.STOP, () => {
        joined = false;
      });
      try {
        await producer.connect();
        await consumer.connect();
        await consumer.subscribe({ topics: [options.topics ?? DEFAULT_TOPICS], fromBeginning: settings.fromBeginning });
        await consumer.run({
          eachBatchAutoResolve: false,
          autoCommit: true,
          autoCommitInterval: 1_000,
          partitionsConsumedConcurrently: settings.partitionsConsumedConcurrently,
          eachBatch,
        });
      } catch (error) {
        await this.stop();
        throw error;
      }
      logger.info({ event: 'router.started', consumer: settings.consumer, groupId: settings.groupId, topics: String(options.topics ?? DEFAULT_TOPICS) }, 'router.started');
    },

    async stop() {
      if (state !== 'running') return;
      state = 'stopping';
      // Cuts retry waits short; the record in hand is not resolved, so it is redelivered next time.
      abort.abort();
      // kafkajs's disconnect waits for the batch in hand, commits resolved offsets and leaves the group.
      await consumer?.disconnect().catch((e: Error) => logger.warn({ error: e.message }, 'router.stop: consumer disconnect failed'));
      await producer?.disconnect().catch(() => {});
      if (!options.pool) await pool?.end().catch(() => {});
      consumer = producer = pool = undefined;
      state = 'idle';
      logger.info({ event: 'router.stopped', ...stats }, 'router.stopped');
    },

    stats: () => ({ ...stats }),

    health: () => ({ running: state === 'running', joined: state === 'running' && joined }),
  };
}
