import { performance } from 'node:perf_hooks';
import { Partitioners, type Admin, type Kafka, type Producer } from 'kafkajs';
import { Client, type Pool, type PoolClient } from 'pg';
import { topicForReplacement, type TopicFor } from '../codec';
import type { OutboxConfig } from '../config';
import { relaySchema, type RelayConfig } from '../config/relay-schema';
import { clientConfig, connectionError, createPool, pgCode } from '../db';
import { OutboxError } from '../errors';
import { createKafka } from '../kafka';
import { createLogger, type Logger } from '../log';
import { backoffDelay, sleepUnlessAborted, type BackoffSettings } from '../retry';
import { runCleanup } from './cleanup';
import { createKeyBlocks, type KeyBlocks } from './key-blocks';
import { publishBatch, type Sender } from './publish';
import { chunkByBytes, groupByTopic, recordBytes, recordFor, type OutboxRow, type RelayRecord } from './records';
import { buildRelaySql, lockNamespaces } from './sql';
import type { RelayEventListener, RelayEventName, RelayStats } from './types';
import { createListener, type Listener } from './listen';
import { NOTIFY_TRIGGER, createWakeSignal, relayChannel } from './wake';
import { nextPollWait } from './poll-wait';

/** Bytes per send: well under Kafka's default 1 MiB record-batch limit; a larger record goes alone. */
const CHUNK_BYTES = 512 * 1024;
/** Headroom for key and headers over the largest payload, as the connector's topic.creation uses. */
const HEADROOM_BYTES = 64 * 1024;

export interface RelayOptions {
  /** Database, outbox table, brokers, topic naming (connector.topicReplacement) and `relay` settings. */
  config: OutboxConfig;
  /** Overrides of config.relay (the CLI flags, tests); validated like the config. */
  settings?: Partial<RelayConfig>;
  /** Topic of an aggregate type; default the connector's route.topic.replacement, as CDC routes. */
  topicFor?: TopicFor;
  /** A kafkajs client (tests inject faults through its socketFactory); default createKafka(config, { role: 'relay' }). */
  kafka?: Kafka;
  logger?: Logger;
  onEvent?: RelayEventListener;
  /** Tests: deterministic jitter. */
  random?: () => number;
}

export interface Relay {
  /** Checks the table, joins the shard group, connects to Kafka and starts the workers. */
  start(): Promise<void>;
  /** Finishes every worker's batch in hand (published rows are marked, nothing is lost), then disconnects. */
  stop(): Promise<void>;
  stats(): Readonly<RelayStats>;
  health(): { running: boolean; workers: number; listening: boolean };
  /** The resolved settings. */
  readonly settings: Readonly<RelayConfig>;
}

function resolveSettings(config: OutboxConfig, overrides: Partial<RelayConfig> = {}): Readonly<RelayConfig> {
  const parsed = relaySchema.safeParse({ ...config.relay, ...overrides });
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => {
      const path = i.path.join('.');
      const value = (overrides as Record<string, unknown>)[path] ?? (config.relay as Record<string, unknown>)[path];
      return `  - relay.${path}: ${i.message}${value === undefined ? '' : ` — got ${JSON.stringify(value)}`}`;
    });
    throw new OutboxError('CONFIG_INVALID', `Invalid relay settings; the relay did not start:\n${lines.join('\n')}`);
  }
  return Object.freeze(parsed.data);
}

/**
 * The polling publisher (docs/relay.md): N workers, one per shard `hashtext(aggregate_id) mod N`. Each
 * loop is one transaction: take the shard's advisory xact lock, claim the oldest unpublished rows of
 * the shard (`published_at IS NULL`, never an id cursor) FOR UPDATE SKIP LOCKED, publish them (acks=all)
 * and only then mark them published, and commit. A crash before the commit leaves them unpublished:
 * at-least-once, never lost.
 */
export function createRelay(options: RelayOptions): Relay {
  const { config } = options;
  const settings = resolveSettings(config, options.settings);
  const logger = options.logger ?? createLogger({ name: 'relay' });
  const topicFor = options.topicFor ?? topicForReplacement(config.connector.topicReplacement);
  const sql = buildRelaySql(config.outbox.schema, config.outbox.table);
  const ns = lockNamespaces(config.outbox.schema, config.outbox.table);
  const backoff: BackoffSettings = { initialDelayMs: settings.retryInitialDelayMs, maxDelayMs: settings.retryMaxDelayMs };
  const random = options.random ?? Math.random;
  const stats: RelayStats = { published: 0, failed: 0, batches: 0, emptyClaims: 0, queries: 0, deleted: 0, lagSeconds: 0, blockedKeys: 0, dbErrors: 0, wakes: 0 };
  const wake = createWakeSignal();
  const channel = relayChannel(config.outbox.schema, config.outbox.table);

  const emit = (name: RelayEventName, data: Record<string, unknown>, level: 'trace' | 'debug' | 'info' | 'warn' | 'error' = 'debug') => {
    try {
      logger[level]({ event: name, ...data }, name);
      options.onEvent?.(name, data);
    } catch {
      // Observers never break the relay.
    }
  };

  let state: 'idle' | 'running' | 'stopping' = 'idle';
  let abort = new AbortController();
  let pool: Pool | undefined;
  let member: Client | undefined;
  let kafka: Kafka | undefined;
  let producer: Producer | undefined;
  let admin: Admin | undefined;
  let listener: Listener | undefined;
  let loops: Promise<void>[] = [];
  const knownTopics = new Set<string>();
  const blocks: KeyBlocks[] = [];

  async function query<R extends object = Record<string, unknown>>(client: Pool | PoolClient | Client, text: string, values?: unknown[]) {
    stats.queries++;
    return client.query<R>(text, values);
  }

  /**
   * Topics appear as Connect's topic.creation would make them. Existing topics are looked up first (creating
   * one that exists makes kafkajs log an error), and concurrent workers share one creation per topic.
   */
  const creating = new Map<string, Promise<void>>();
  async function ensureTopics(records: readonly RelayRecord[]): Promise<void> {
    const missing = [...new Set(records.map((r) => r.topic))].filter((t) => !knownTopics.has(t));
    if (missing.length === 0) return;
    await Promise.all(
      missing.map((topic) => {
        let pending = creating.get(topic);
        if (!pending) {
          pending = (async () => {
            const existing = new Set(await (admin as Admin).listTopics());
            if (!existing.has(topic)) {
              await (admin as Admin).createTopics({
                waitForLeaders: true,
                topics: [
                  {
                    topic,
                    numPartitions: settings.topicPartitions,
                    replicationFactor: settings.topicReplicationFactor,
                    // As the connector's topic.creation.default.max.message.bytes: the largest payload plus headroom.
                    configEntries: [{ name: 'max.message.bytes', value: String(Math.max(1024 * 1024, config.outbox.maxPayloadBytes + HEADROOM_BYTES)) }],
                  },
                ],
              });
            }
            knownTopics.add(topic);
          })().finally(() => creating.delete(topic));
          creating.set(topic, pending);
        }
        return pending;
      }),
    );
  }

  const message = (r: RelayRecord) => ({ key: r.key, value: r.value, headers: r.headers });
  // Chunks are sent one after the other, each acknowledged before the next: a key's order holds across them.
  const sender: Sender = {
    async sendAll(records) {
      await ensureTopics(records);
      for (const chunk of chunkByBytes(records, CHUNK_BYTES)) {
        await (producer as Producer).sendBatch({ acks: -1, topicMessages: groupByTopic(chunk).map(({ topic, records: rs }) => ({ topic, messages: rs.map(message) })) });
      }
    },
    async sendKey(group) {
      await ensureTopics(group.records);
      for (const chunk of chunkByBytes(group.records, CHUNK_BYTES)) {
        await (producer as Producer).send({ topic: group.topic, acks: -1, messages: chunk.map(message) });
      }
    },
  };

  /**
   * One claim transaction of one shard. Returns how many rows it claimed, whether the batch was full (by
   * rows or bytes: more may be waiting) and whether every publish failed.
   */
  async function runBatch(shard: number, keyBlocks: KeyBlocks, idle: boolean): Promise<{ claimed: number; full: boolean; allFailed: boolean }> {
    if (idle) {
      const { rowCount } = await query(pool as Pool, sql.probe, [shard, settings.workers, keyBlocks.active()]);
      if (!rowCount) {
        stats.emptyClaims++;
        emit('relay.batch', { shard, claimed: 0, queries: 1 }, 'trace');
        return { claimed: 0, full: false, allFailed: false };
      }
    }
    const client = await (pool as Pool).connect();
    let queries = 0;
    const q = <R extends object>(text: string, values?: unknown[]) => {
      queries++;
      return query<R>(client, text, values);
    };
    let broken: Error | undefined;
    try {
      await q('BEGIN');
      const claimStart = performance.now();
      const { rows } = await q<OutboxRow>(sql.claim, [ns.shards, shard, settings.workers, settings.batchSize, keyBlocks.active(), settings.maxBatchBytes]);
      const claimMs = performance.now() - claimStart;
      if (rows.length === 0) {
        await q('COMMIT');
        stats.emptyClaims++;
        emit('relay.batch', { shard, claimed: 0, claimMs, queries }, 'trace');
        return { claimed: 0, full: false, allFailed: false };
      }
      const records = rows.map((row) => recordFor(row, topicFor));
      // The claim counted the same bytes (ROW_BYTES_EXPRESSION): at most maxBatchBytes plus one row.
      const bytes = records.reduce((n, r) => n + recordBytes(r), 0);
      const outcome = await publishBatch(records, sender);
      const publishedIds = outcome.published.map((r) => r.rowId);
      await q(sql.mark, [publishedIds, records.map((r) => r.rowId)]);
      await q('COMMIT');

      const publishedByTopic: Record<string, number> = {};
      for (const r of outcome.published) publishedByTopic[r.topic] = (publishedByTopic[r.topic] ?? 0) + 1;
      const failedByTopic: Record<string, number> = {};
      for (const { group, error } of outcome.failed) {
        failedByTopic[group.topic] = (failedByTopic[group.topic] ?? 0) + group.records.length;
        const head = group.records[0] as RelayRecord;
        const retryInMs = keyBlocks.block(head.aggregateId, head.attempts + 1);
        emit(
          'relay.publish-failed',
          { shard, code: 'RELAY_PUBLISH_FAILED', topic: group.topic, aggregateId: group.key, rows: group.records.length, attempts: head.attempts + 1, retryInMs, error: (error as Error)?.message ?? String(error) },
          'warn',
        );
      }
      stats.batches++;
      stats.published += outcome.published.length;
      stats.failed += records.length - outcome.published.length;
      stats.blockedKeys = blocks.reduce((n, b) => n + b.size(), 0);
      emit('relay.batch', { shard, claimed: rows.length, bytes, published: outcome.published.length, failed: records.length - outcome.published.length, claimMs, queries, publishedByTopic, failedByTopic });
      return { claimed: rows.length, full: rows.length >= settings.batchSize || bytes >= settings.maxBatchBytes, allFailed: outcome.published.length === 0 };
    } catch (error) {
      broken = error as Error;
      stats.queries++;
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      // A client that failed mid-transaction is dropped, not reused.
      client.release(broken);
    }
  }

  async function work(shard: number): Promise<void> {
    const keyBlocks = (blocks[shard] = createKeyBlocks(backoff, Date.now, random));
    let dbFailures = 0;
    let sendFailures = 0;
    const signal = abort.signal;
    let idle = false;
    /** The last idle wait: claims that find rows shorten it, empty ones double it (nextPollWait). */
    let pollWait = settings.pollIntervalMs;
    while (!signal.aborted) {
      let wait = settings.pollIntervalMs;
      let wakeable = true;
      try {
        const { claimed, full, allFailed } = await runBatch(shard, keyBlocks, idle);
        idle = claimed === 0;
        dbFailures = 0;
        sendFailures = allFailed ? sendFailures + 1 : 0;
        // Every key failed: the broker is likely down, back off the whole shard.
        if (allFailed) {
          wait = backoffDelay(sendFailures, backoff, random);
          wakeable = false;
        } else {
          wait = pollWait = nextPollWait(pollWait, { claimed, full }, settings);
          if (wait === 0) continue;
        }
      } catch (error) {
        dbFailures++;
        stats.dbErrors++;
        wait = backoffDelay(dbFailures, backoff, random);
        wakeable = false;
        emit('relay.db-error', { shard, code: pgCode(error), error: (error as Error)?.message ?? String(error), retryInMs: wait }, 'warn');
      }
      // A notification ends an idle wait, never a backoff: new rows do not mend a broken broker or database.
      if (wakeable) await wake.sleep(shard, wait, signal);
      else await sleepUnlessAborted(wait, signal);
    }
  }

  async function every(intervalMs: number, body: () => Promise<void>, what: string): Promise<void> {
    const signal = abort.signal;
    while (!signal.aborted) {
      try {
        await body();
      } catch (error) {
        emit('relay.db-error', { task: what, code: pgCode(error), error: (error as Error)?.message ?? String(error) }, 'warn');
      }
      await sleepUnlessAborted(intervalMs, signal);
    }
  }

  async function measureLag(): Promise<void> {
    const { rows } = await query<{ seconds: number }>(pool as Pool, sql.lag);
    stats.lagSeconds = Number(rows[0]?.seconds ?? 0);
    emit('relay.lag', { seconds: stats.lagSeconds, queries: 1 }, 'trace');
  }

  async function cleanup(): Promise<void> {
    const result = await runCleanup(
      async (limit) => (await query(pool as Pool, sql.cleanup, [settings.retentionMs, limit])).rowCount ?? 0,
      { batchSize: settings.cleanupBatchSize, signal: abort.signal },
    );
    stats.deleted += result.deleted;
    emit('relay.cleanup', { deleted: result.deleted, queries: result.batches }, result.deleted > 0 ? 'info' : 'debug');
  }

  /** Refuses to run beside an instance with another shard count: their shards would overlap and break per-aggregate order. */
  async function join(): Promise<void> {
    // Its own session, outside the pool: the shared lock lives as long as this connection.
    const client = new Client(clientConfig(config.database, { application_name: 'outbox-relay:member' }));
    client.on('error', (error) => logger.warn({ event: 'relay.db-idle-error', error: error.message }, 'relay.db-idle-error'));
    try {
      await client.connect();
    } catch (error) {
      throw connectionError(clientConfig(config.database), error);
    }
    member = client;
    await query(member, sql.join, [ns.members, settings.workers]);
    const { rows } = await query<{ workers: string }>(member, sql.members, [ns.members]);
    const others = rows.map((r) => Number(r.workers)).filter((n) => n !== settings.workers);
    if (others.length > 0) {
      throw new OutboxError(
        'RELAY_WORKERS_MISMATCH',
        `Another relay on ${config.outbox.schema}.${config.outbox.table} runs with ${others.join(', ')} worker(s), this one with ${settings.workers}. ` +
          'The worker count is the shard count: instances with different counts would publish one aggregate from two shards, out of order. ' +
          'Start every instance with the same --workers (relay.workers / OUTBOX_RELAY_WORKERS), or stop the others first.',
        { details: { workers: settings.workers, others } },
      );
    }
  }

  async function checkTable(): Promise<void> {
    try {
      await query(pool as Pool, sql.check);
    } catch (error) {
      const code = pgCode(error);
      if (code === '42P01' || code === '42703' || code === '3F000') {
        throw new OutboxError(
          'RELAY_TABLE_INVALID',
          `The outbox table ${config.outbox.schema}.${config.outbox.table} is missing or lacks the relay's columns (${(error as Error).message}). ` +
            'Run `outbox db:provision` against this database, or set outbox.schema / outbox.table (OUTBOX_SCHEMA / OUTBOX_TABLE) to the provisioned table.',
          { cause: error, details: { code } },
        );
      }
      if (code === undefined) throw connectionError(clientConfig(config.database), error);
      throw error;
    }
  }

  async function connectKafka(): Promise<void> {
    kafka = options.kafka ?? createKafka(config, { role: 'relay', logger, retries: 5 });
    // Not idempotent: kafkajs's idempotent producer needs endless retries (a send that never fails blocks
    // shutdown and the per-key backoff), and with bounded ones it may reuse sequence numbers for other
    // records. acks=all plus marking after the ack gives at-least-once; the router's inbox dedups.
    producer = kafka.producer({ allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner });
    admin = kafka.admin();
    try {
      await producer.connect();
      await admin.connect();
    } catch (error) {
      throw new OutboxError(
        'RELAY_KAFKA_UNAVAILABLE',
        `Cannot connect to Kafka at ${config.kafka.brokers.join(', ')}: ${(error as Error)?.message ?? String(error)}. ` +
          'Check that the brokers run and are reachable (KAFKA_BROKERS or kafka.brokers in --config; `npm run stack:up` for the local stack).',
        { retriable: true, cause: error, details: { brokers: [...config.kafka.brokers] } },
      );
    }
  }

  /** The LISTEN session (relay.notify), and whether db:provision made the trigger that feeds it. */
  async function listen(): Promise<void> {
    if (!settings.notify) return;
    const { rows } = await query<{ present: boolean }>(pool as Pool, sql.notifyTrigger, [config.outbox.schema, config.outbox.table, NOTIFY_TRIGGER]);
    if (!rows[0]?.present) {
      emit(
        'relay.listen',
        { state: 'no-trigger', channel, hint: `relay.notify is on but ${config.outbox.schema}.${config.outbox.table} has no notify trigger: run db:provision with relay.notify (OUTBOX_RELAY_NOTIFY=true). Until then new rows wait up to pollIntervalMs.` },
        'warn',
      );
    }
    listener = createListener({
      client: clientConfig(config.database, { application_name: 'outbox-relay:listen' }),
      channel,
      backoff,
      random,
      onWake: () => {
        stats.wakes++;
        wake.wakeAll();
      },
      onState: (state, data) => emit('relay.listen', { state, channel, ...data }, state === 'down' ? 'warn' : 'info'),
    });
    await listener.start();
  }

  async function shutdown(): Promise<void> {
    abort.abort();
    await listener?.stop();
    listener = undefined;
    await Promise.allSettled(loops);
    loops = [];
    await producer?.disconnect().catch(() => {});
    await admin?.disconnect().catch(() => {});
    await member?.end().catch(() => {});
    await pool?.end().catch(() => {});
    member = pool = producer = admin = undefined;
  }

  return {
    settings,
    async start() {
      if (state !== 'idle') throw new Error(`relay.start(): the relay is ${state}`);
      state = 'running';
      abort = new AbortController();
      knownTopics.clear();
      pool = createPool(
        config.database,
        { application_name: 'outbox-relay', max: settings.poolSize + 1 }, // + lag and cleanup
        (error) => logger.warn({ event: 'relay.db-idle-error', error: error.message }, 'relay.db-idle-error'),
      );
      try {
        await checkTable();
        await join();
        await connectKafka();
        await listen();
      } catch (error) {
        await shutdown();
        state = 'idle';
        throw error;
      }
      loops = [
        ...Array.from({ length: settings.workers }, (_, shard) => work(shard)),
        every(settings.lagIntervalMs, measureLag, 'lag'),
        every(settings.cleanupIntervalMs, cleanup, 'cleanup'),
      ];
      emit('relay.started', { workers: settings.workers, batchSize: settings.batchSize, maxBatchBytes: settings.maxBatchBytes, pollIntervalMs: settings.pollIntervalMs, notify: settings.notify, table: `${config.outbox.schema}.${config.outbox.table}` }, 'info');
    },

    async stop() {
      if (state !== 'running') return;
      state = 'stopping';
      await shutdown();
      state = 'idle';
      emit('relay.stopped', { ...stats }, 'info');
    },

    stats: () => ({ ...stats, blockedKeys: blocks.reduce((n, b) => n + (b?.size() ?? 0), 0) }),

    health: () => ({ running: state === 'running', workers: settings.workers, listening: listener?.listening() ?? false }),
  };
}
