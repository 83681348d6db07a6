import { randomUUID } from 'node:crypto';
import { Partitioners, type Kafka, type KafkaMessage } from 'kafkajs';
import type { Pool } from 'pg';
import { OutboxError } from '../errors';
import type { Logger } from '../log';
import { DEAD_LETTER_HEADERS, REDUCED_HEADER, sanitizeHeaders } from './dead-letter';
import { DLQ_HEADER, HEADER, headerText } from '../envelope';
import { REPLAY_HEADER } from './record-context';

export const DEFAULT_REPLAY_TIMEOUT_MS = 60_000;

export interface ReplayOptions {
  kafka: Kafka;
  /** The dead-letter topic, e.g. outbox.dlq.order. */
  dlqTopic: string;
  /** Only dead letters with this record key. */
  key?: string;
  /** Only these event ids (the `id` header). */
  ids?: readonly string[];
  /**
   * Only dead letters still outstanding for this consumer: their ids are in the parked table. Without
   * it (`--all`), every matching dead letter is re-published; the inbox skips those applied since.
   */
  outstanding?: { pool: Pool; parkedTable: string; consumer: string; aggregateType: string };
  /**
   * Without `outstanding` (`--all`): dead letters written longer ago than this are left alone
   * (`router.dlqReplayHorizonMs`). An event applied by an earlier replay is recognised only while its
   * inbox row exists, and inbox retention keeps it at least this long after the dead letter was written
   * (docs/operations.md, "Inbox retention"); an older one could be applied twice. Outstanding dead
   * letters are always replayable: the inbox rows of parked events are never pruned.
   */
  horizonMs?: number;
  dryRun?: boolean;
  logger?: Logger;
  /** Gives up when reading the DLQ makes no progress for this long (a broker problem). Default 60 s. */
  timeoutMs?: number;
}

export interface ReplayedRecord {
  id?: string;
  key: string;
  originalTopic: string;
  dlqPartition: number;
  dlqOffset: string;
  errorCode?: string;
}

export interface ReplayReport {
  dlqTopic: string;
  scanned: number;
  replayed: ReplayedRecord[];
  /** Dead letters without an x-original-topic header: not ours, left alone. */
  withoutOrigin: number;
  /** Matching dead letters the DLQ took only without their value (x-dead-letter-reduced): not replayable. */
  reduced: number;
  /** Matching dead letters older than `horizonMs`, left alone. */
  beyondHorizon: number;
  dryRun: boolean;
}

/**
 * `outbox dlq:replay`: reads a dead-letter topic from its start to the end it has now and re-publishes
 * each matching dead letter AS IT IS READ to its original topic, with its original key, value and
 * headers (the x- headers dropped, `x-replayed-at` added; headers sanitized like a dead letter's, so a
 * value kafkajs cannot encode never makes a replay unwritable). Memory stays bounded: no dead letter is
 * held after it was sent, only the ids seen (to send each once) and the report's one line per replay.
 * Each DLQ partition is read in order and a key's dead letters share a partition, so a key's events
 * come back in the order they failed. The router applies a replayed event through the inbox (once),
 * and a replayed event that is its key's earliest parked one releases it.
 */
export async function replayDeadLetters(options: ReplayOptions): Promise<ReplayReport> {
  const { kafka, dlqTopic } = options;
  const timeoutMs = options.timeoutMs ?? DEFAULT_REPLAY_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
    throw new OutboxError('FLAG_INVALID', `The replay read timeout must be a whole number of milliseconds ≥ 1, got ${JSON.stringify(timeoutMs)} (--timeout-ms).`);
  }
  const admin = kafka.admin();
  await admin.connect();
  let ends: Map<number, bigint>;
  try {
    const topics = await admin.listTopics();
    if (!topics.includes(dlqTopic)) {
      const dlqs = topics.filter((t) => t.includes('.dlq.')).sort();
      throw new OutboxError('DLQ_TOPIC_MISSING', `The dead-letter topic ${JSON.stringify(dlqTopic)} does not exist. Dead-letter topics here: ${dlqs.length ? dlqs.join(', ') : '(none)'}.`, {
        details: { dlqTopic },
      });
    }
    const offsets = await admin.fetchTopicOffsets(dlqTopic);
    ends = new Map(offsets.filter((o) => BigInt(o.high) > BigInt(o.low)).map((o) => [o.partition, BigInt(o.high)]));
  } finally {
    await admin.disconnect();
  }

  let wanted: Set<string> | undefined = options.ids?.length ? new Set(options.ids.map((id) => id.toLowerCase())) : undefined;
  if (options.outstanding) {
    const { pool, parkedTable, consumer, aggregateType } = options.outstanding;
    const { rows } = await pool.query<{ event_id: string }>(
      `SELECT event_id FROM ${parkedTable} WHERE consumer = $1 AND aggregate_type = $2 AND ($3::text IS NULL OR aggregate_id = $3)`,
      [consumer, aggregateType, options.key ?? null],
    );
    const parked = new Set(rows.map((r) => r.event_id));
    wanted = wanted ? new Set([...wanted].filter((id) => parked.has(id))) : parked;
  }

  const report: ReplayReport = { dlqTopic, scanned: 0, replayed: [], withoutOrigin: 0, reduced: 0, beyondHorizon: 0, dryRun: Boolean(options.dryRun) };
  const horizonStart = options.outstanding || options.horizonMs === undefined ? undefined : Date.now() - options.horizonMs;
  if (ends.size === 0 || (wanted && wanted.size === 0)) return report;

  // One in flight at a time: a key's replays reach its partition in order.
  const producer = options.dryRun ? undefined : kafka.producer({ maxInFlightRequests: 1, allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner });
  await producer?.connect();
  const seen = new Set<string>();
  const at = new Date().toISOString();
  try {
    await readToEnd(kafka, dlqTopic, ends, timeoutMs, async (partition, message) => {
      report.scanned++;
      const originalTopic = headerText(message.headers, DLQ_HEADER.originalTopic);
      if (!originalTopic) {
        report.withoutOrigin++;
        return;
      }
      const key = message.key?.toString('utf8') ?? '';
      const id = headerText(message.headers, HEADER.id)?.toLowerCase();
      if (options.key !== undefined && key !== options.key) return;
      if (wanted && (!id || !wanted.has(id))) return;
      if (horizonStart !== undefined && Number(message.timestamp) < horizonStart) {
        report.beyondHorizon++;
        return;
      }
      // Its value was refused by the DLQ: nothing to replay (the original is at x-original-offset).
      if (headerText(message.headers, REDUCED_HEADER) !== undefined) {
        report.reduced++;
        return;
      }
      // Dead-lettered twice (a replay that failed again): once is enough, at its first place.
      if (id) {
        if (seen.has(id)) return;
        seen.add(id);
      }
      if (producer) {
        const headers = sanitizeHeaders(message.headers, (name) => DEAD_LETTER_HEADERS.test(name));
        headers[REPLAY_HEADER] = at;
        await producer.send({ topic: originalTopic, acks: -1, messages: [{ key: message.key, value: message.value, headers }] });
      }
      report.replayed.push({ id: headerText(message.headers, HEADER.id), key, originalTopic, dlqPartition: partition, dlqOffset: message.offset, errorCode: headerText(message.headers, DLQ_HEADER.errorCode) });
    });
  } finally {
    await producer?.disconnect().catch(() => {});
  }
  if (!options.dryRun) options.logger?.info({ event: 'dlq.replayed', dlqTopic, replayed: report.replayed.length }, 'dead letters replayed');
  return report;
}

/**
 * Reads each partition from its start up to the end recorded before reading (new dead letters wait for
 * the next replay), handing each record to `each` in partition order before fetching more. Gives up
 * (DLQ_UNAVAILABLE) when no record arrived for `timeoutMs`: a broker problem, not a large topic.
 *
 * The consumer is only disconnected once `run()` has returned, i.e. its group join finished or crashed:
 * kafkajs's `stop()` does nothing to a runner still joining, so a disconnect during the join would let
 * the join go on over closed connections, crash with a retriable error and be restarted by kafkajs (a
 * consumer left running after the replay returned). And once the replay is closing, a crash is never
 * restarted (`restartOnFailure`); before that, kafkajs restarts a retriable crash as usual.
 */
async function readToEnd(kafka: Kafka, topic: string, ends: Map<number, bigint>, timeoutMs: number, each: (partition: number, message: KafkaMessage) => Promise<void>): Promise<void> {
  const groupId = `outbox-dlq-replay-${randomUUID()}`;
  let closing = false;
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100, retry: { retries: 5, restartOnFailure: async () => !closing } });
  const remaining = new Set(ends.keys());
  let running: Promise<void> | undefined;
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      let failed = false;
      const fail = (error: unknown) => {
        failed = true;
        clearTimeout(timer);
        reject(error);
      };
      const arm = () => {
        clearTimeout(timer);
        timer = setTimeout(
          () => fail(new OutboxError('DLQ_UNAVAILABLE', `Reading ${topic} made no progress for ${timeoutMs} ms (--timeout-ms); check the brokers (outbox status).`, { retriable: true })),
          timeoutMs,
        );
      };
      arm();
      running = consumer.run({
        autoCommit: false,
        eachBatch: async ({ batch, heartbeat }) => {
          const end = ends.get(batch.partition);
          if (end === undefined || failed || !remaining.has(batch.partition)) return;
          arm();
          try {
            for (const message of batch.messages) {
              if (BigInt(message.offset) >= end) break;
              await each(batch.partition, message);
              if (failed) return;
              arm();
              await heartbeat();
            }
          } catch (error) {
            fail(error);
            return;
          }
          // Non-transactional topic: offsets are dense, so reaching end - 1 means everything before was read.
          if (BigInt(batch.messages.at(-1)?.offset ?? '-1') >= end - 1n) remaining.delete(batch.partition);
          if (remaining.size === 0) {
            clearTimeout(timer);
            resolve();
          }
        },
      });
      running.catch(fail);
    });
  } finally {
    closing = true;
    await running?.catch(() => {});
    await consumer.disconnect().catch(() => {});
    const admin = kafka.admin();
    await admin
      .connect()
      .then(() => admin.deleteGroups([groupId]))
      .catch(() => {})
      .finally(() => admin.disconnect().catch(() => {}));
  }
}
