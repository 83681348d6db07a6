import { randomUUID } from 'node:crypto';
import type { IHeaders, Kafka, KafkaMessage } from 'kafkajs';
import type { Pool } from 'pg';
import { OutboxError } from '../errors';
import type { Logger } from '../log';
import { headerText } from './record-headers';
import { REPLAY_HEADER } from './process-record';

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
  dryRun?: boolean;
  logger?: Logger;
  /** Gives up reading the DLQ after this long (a broker problem). */
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
  dryRun: boolean;
}

const DEAD_LETTER_HEADERS = /^x-(original-|error-|attempts$|replayed-at$)/;

/**
 * `outbox dlq:replay`: reads a dead-letter topic from its start to the end it has now, picks the
 * matching dead letters, and re-publishes each to its original topic with its original key, value and
 * headers (the x- headers dropped, `x-replayed-at` added), in DLQ order, so a key's events come back
 * in the order they failed. The router applies a replayed event through the inbox (once), and a
 * replayed event that is its key's earliest parked one releases the key.
 */
export async function replayDeadLetters(options: ReplayOptions): Promise<ReplayReport> {
  const { kafka, dlqTopic } = options;
  const admin = kafka.admin();
  await admin.connect();
  let ends: Map<number, bigint>;
  try {
    const topics = await admin.listTopics();
    if (!topics.includes(dlqTopic)) {
      const dlqs = topics.filter((t) => t.includes('.dlq.')).sort();
      throw new OutboxError('CONFIG_INVALID', `The dead-letter topic ${JSON.stringify(dlqTopic)} does not exist. Dead-letter topics here: ${dlqs.length ? dlqs.join(', ') : '(none)'}.`, {
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
      `SELECT event_id FROM ${parkedTable} WHERE consumer = $1 AND aggregate_type = $2 AND ($3::text IS NULL OR aggregate_id = $3) ORDER BY seq`,
      [consumer, aggregateType, options.key ?? null],
    );
    const parked = new Set(rows.map((r) => r.event_id));
    wanted = wanted ? new Set([...wanted].filter((id) => parked.has(id))) : parked;
  }

  const report: ReplayReport = { dlqTopic, scanned: 0, replayed: [], withoutOrigin: 0, dryRun: Boolean(options.dryRun) };
  if (ends.size === 0 || (wanted && wanted.size === 0)) return report;

  const byPartition = await readToEnd(kafka, dlqTopic, ends, options.timeoutMs ?? 60_000);
  const picked: Array<{ partition: number; message: KafkaMessage; originalTopic: string }> = [];
  const seen = new Set<string>();
  for (const [partition, messages] of [...byPartition.entries()].sort((a, b) => a[0] - b[0])) {
    for (const message of messages) {
      report.scanned++;
      const originalTopic = headerText(message.headers, 'x-original-topic');
      if (!originalTopic) {
        report.withoutOrigin++;
        continue;
      }
      const key = message.key?.toString('utf8') ?? '';
      const id = headerText(message.headers, 'id')?.toLowerCase();
      if (options.key !== undefined && key !== options.key) continue;
      if (wanted && (!id || !wanted.has(id))) continue;
      // Dead-lettered twice (a replay that failed again): once is enough, at its first place.
      if (id) {
        if (seen.has(id)) continue;
        seen.add(id);
      }
      picked.push({ partition, message, originalTopic });
    }
  }

  for (const p of picked) {
    report.replayed.push({
      id: headerText(p.message.headers, 'id'),
      key: p.message.key?.toString('utf8') ?? '',
      originalTopic: p.originalTopic,
      dlqPartition: p.partition,
      dlqOffset: p.message.offset,
      errorCode: headerText(p.message.headers, 'x-error-code'),
    });
  }
  if (options.dryRun || picked.length === 0) return report;

  // One in flight at a time: a key's replays reach its partition in order.
  const producer = kafka.producer({ maxInFlightRequests: 1, allowAutoTopicCreation: false });
  await producer.connect();
  try {
    const at = new Date().toISOString();
    for (const p of picked) {
      const headers: IHeaders = {};
      for (const [name, value] of Object.entries(p.message.headers ?? {})) {
        if (value !== undefined && !DEAD_LETTER_HEADERS.test(name)) headers[name] = value;
      }
      headers[REPLAY_HEADER] = at;
      await producer.send({ topic: p.originalTopic, acks: -1, messages: [{ key: p.message.key, value: p.message.value, headers }] });
    }
  } finally {
    await producer.disconnect();
  }
  options.logger?.info({ event: 'dlq.replayed', dlqTopic, replayed: picked.length }, 'dead letters replayed');
  return report;
}

/** Reads each partition from its start up to the end recorded before reading (new dead letters wait for the next replay). */
async function readToEnd(kafka: Kafka, topic: string, ends: Map<number, bigint>, timeoutMs: number): Promise<Map<number, KafkaMessage[]>> {
  const groupId = `outbox-dlq-replay-${randomUUID()}`;
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100 });
  const result = new Map<number, KafkaMessage[]>([...ends.keys()].map((p) => [p, []]));
  const remaining = new Set(ends.keys());
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new OutboxError('DLQ_UNAVAILABLE', `Reading ${topic} did not reach its end within ${timeoutMs} ms; check the brokers (outbox status).`, { retriable: true })),
        timeoutMs,
      );
      consumer
        .run({
          autoCommit: false,
          eachBatch: async ({ batch }) => {
            const end = ends.get(batch.partition);
            if (end === undefined) return;
            for (const message of batch.messages) {
              if (BigInt(message.offset) >= end) break;
              (result.get(batch.partition) as KafkaMessage[]).push(message);
            }
            // Non-transactional topic: offsets are dense, so reaching end - 1 means everything before was read.
            if (BigInt(batch.messages.at(-1)?.offset ?? '-1') >= end - 1n) remaining.delete(batch.partition);
            if (remaining.size === 0) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect().catch(() => {});
    const admin = kafka.admin();
    await admin
      .connect()
      .then(() => admin.deleteGroups([groupId]))
      .catch(() => {})
      .finally(() => admin.disconnect().catch(() => {}));
  }
  return result;
}
