import type { IHeaders } from 'kafkajs';
import type { TopicFor } from '../codec';
import { envelopeOf, type OutboxEventRow } from '../envelope';

/** One claimed outbox row, as node-postgres returns it: the event columns and the relay's bookkeeping. */
export interface OutboxRow extends OutboxEventRow {
  created_at: Date;
  attempts: number;
}

/** What the relay sends for one row: the Event Router's record, byte for byte. */
export interface RelayRecord {
  rowId: string;
  aggregateId: string;
  /** The row's attempts before this one. */
  attempts: number;
  topic: string;
  key: string;
  value: Buffer;
  headers: IHeaders;
}

/**
 * The record the Debezium Outbox Event Router makes of a row (src/envelope), on the topic
 * route.topic.replacement names (src/topics).
 */
export function recordFor(row: OutboxRow, topicFor: TopicFor): RelayRecord {
  return { rowId: row.id, aggregateId: row.aggregate_id, attempts: row.attempts, topic: topicFor(row.aggregate_type), ...envelopeOf(row) };
}

/** One key's records in claim order; they are sent together, so they succeed or fail together. */
export interface KeyGroup {
  topic: string;
  key: string;
  records: RelayRecord[];
}

/** Groups records by (topic, key), keeping claim order inside each group and first-seen order of groups. */
export function groupByKey(records: readonly RelayRecord[]): KeyGroup[] {
  const groups = new Map<string, KeyGroup>();
  for (const record of records) {
    const id = `${record.topic}\u0000${record.key}`;
    let group = groups.get(id);
    if (!group) {
      group = { topic: record.topic, key: record.key, records: [] };
      groups.set(id, group);
    }
    group.records.push(record);
  }
  return [...groups.values()];
}

/** Records per topic, in claim order: one kafkajs sendBatch entry each. */
export function groupByTopic(records: readonly RelayRecord[]): Array<{ topic: string; records: RelayRecord[] }> {
  const topics = new Map<string, RelayRecord[]>();
  for (const record of records) {
    const list = topics.get(record.topic);
    if (list) list.push(record);
    else topics.set(record.topic, [record]);
  }
  return [...topics.entries()].map(([topic, rs]) => ({ topic, records: rs }));
}

/** Bytes a record adds to a Kafka record batch, roughly: key, value, header names and values, framing. */
export function recordBytes(record: RelayRecord): number {
  let size = 64 + Buffer.byteLength(record.key) + record.value.length;
  for (const [name, value] of Object.entries(record.headers)) size += 8 + Buffer.byteLength(name) + (value === undefined ? 0 : Buffer.byteLength(String(value)));
  return size;
}

/**
 * Consecutive chunks of at most `maxBytes` each (a larger record goes alone), in order. Kafka refuses a
 * record batch over the topic's max.message.bytes (1 MiB by default), and kafkajs puts everything for
 * one partition in one call into one batch: without chunks, a few large payloads of one key would fail
 * every time and block that key for good.
 */
export function chunkByBytes<T extends RelayRecord>(records: readonly T[], maxBytes: number): T[][] {
  const chunks: T[][] = [];
  let current: T[] = [];
  let size = 0;
  for (const record of records) {
    const bytes = recordBytes(record);
    if (current.length > 0 && size + bytes > maxBytes) {
      chunks.push(current);
      current = [];
      size = 0;
    }
    current.push(record);
    size += bytes;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}
