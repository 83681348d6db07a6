/**
 * The routed topics' partition counts as the toolkit last set or saw them, kept in the outbox's database
 * (migration 014, `<outbox>_topic_partitions`). Adding partitions to a topic moves some keys to a new
 * partition; if a key's earlier events are still unread in the old one, two consumers apply them out of
 * order (KAFKA-20030), and nothing in Kafka says it happened. `outbox topics:grow` grows safely and records
 * the new count; `connector:deploy` records what it finds. `outbox status` compares each routed topic with
 * its record (or, for a topic created after the deploy, with the connector's
 * topic.creation.default.partitions) and warns when the count changed some other way.
 */
import type { Admin } from 'kafkajs';
import type { Client } from 'pg';
import { pgCode } from '../db';
import { topicPartitionsTable } from '../provision/sql-files';
import { topicNames } from './index';

type Queryable = Pick<Client, 'query'>;

export interface RecordedPartitions {
  topic: string;
  partitions: number;
  /** ISO 8601, the database's clock. */
  recordedAt: string;
  /** `connector:deploy` or `topics:grow`. */
  recordedBy: string;
}

export interface PartitionChange {
  topic: string;
  partitions: number;
  /** The count it is compared with. */
  expected: number;
  /** Where `expected` comes from: a record (connector:deploy, topics:grow) or the connector's creation default. */
  source: string;
  /** When the record was made (null for the creation default). */
  since: string | null;
}

/** Each existing routed topic (connector.topicReplacement) and its partition count. */
export async function routedPartitionCounts(admin: Pick<Admin, 'listTopics' | 'fetchTopicMetadata'>, topicReplacement: string): Promise<Map<string, number>> {
  const { pattern } = topicNames(topicReplacement);
  const routed = (await admin.listTopics()).filter((t) => pattern.test(t)).sort();
  if (routed.length === 0) return new Map();
  const { topics } = await admin.fetchTopicMetadata({ topics: routed });
  return new Map(topics.map((t) => [t.name, t.partitions.length]));
}

/** The records, or null when the table does not exist (a database provisioned before migration 014). */
export async function readRecordedPartitions(db: Queryable, outbox: { schema: string; table: string }): Promise<RecordedPartitions[] | null> {
  try {
    const { rows } = await db.query<{ topic: string; partitions: number; recorded_at: Date; recorded_by: string }>(
      `SELECT topic, partitions, recorded_at, recorded_by FROM ${topicPartitionsTable(outbox)} ORDER BY topic`,
    );
    return rows.map((r) => ({ topic: r.topic, partitions: r.partitions, recordedAt: r.recorded_at.toISOString(), recordedBy: r.recorded_by }));
  } catch (error) {
    if (pgCode(error) === '42P01') return null;
    throw error;
  }
}

/**
 * Records `counts` (insert or update; unchanged counts keep their record). Returns the records it replaced
 * whose count differed, or null when the table does not exist.
 */
export async function recordPartitions(db: Queryable, outbox: { schema: string; table: string }, counts: ReadonlyMap<string, number>, recordedBy: string): Promise<RecordedPartitions[] | null> {
  if (counts.size === 0) return (await readRecordedPartitions(db, outbox)) === null ? null : [];
  const before = await readRecordedPartitions(db, outbox);
  if (before === null) return null;
  const topics = [...counts.keys()];
  await db.query(
    `INSERT INTO ${topicPartitionsTable(outbox)} (topic, partitions, recorded_by)
     SELECT * FROM unnest($1::text[], $2::int[], array_fill($3::text, ARRAY[cardinality($1::text[])]))
     ON CONFLICT (topic) DO UPDATE SET partitions = EXCLUDED.partitions, recorded_at = now(), recorded_by = EXCLUDED.recorded_by
     WHERE ${topicPartitionsTable(outbox)}.partitions IS DISTINCT FROM EXCLUDED.partitions`,
    [topics, topics.map((t) => counts.get(t)), recordedBy],
  );
  return before.filter((r) => counts.has(r.topic) && counts.get(r.topic) !== r.partitions);
}

/**
 * Pure: the routed topics whose partition count is not what the toolkit recorded, or, unrecorded (made
 * by the connector after the deploy), not the connector's topic.creation.default.partitions (undefined or
 * -1, the broker's default: such topics are not compared).
 */
export function partitionChanges(current: ReadonlyMap<string, number>, recorded: readonly RecordedPartitions[], creationDefault?: number): PartitionChange[] {
  const byTopic = new Map(recorded.map((r) => [r.topic, r]));
  const changes: PartitionChange[] = [];
  for (const [topic, partitions] of [...current].sort(([a], [b]) => a.localeCompare(b))) {
    const record = byTopic.get(topic);
    if (record) {
      if (record.partitions !== partitions) changes.push({ topic, partitions, expected: record.partitions, source: record.recordedBy, since: record.recordedAt });
    } else if (creationDefault !== undefined && creationDefault > 0 && partitions !== creationDefault) {
      changes.push({ topic, partitions, expected: creationDefault, source: 'topic.creation.default.partitions', since: null });
    }
  }
  return changes;
}

const GROW_ADVICE = 'grow with `outbox topics:grow` from now on (`outbox connector:deploy` records the new count)';

/** One change as a sentence (status warnings; the deploy, which records the new count, says so instead). */
export function describeChange(c: PartitionChange, advice = GROW_ADVICE): string {
  const from = c.since ? `${c.expected} when ${c.source} recorded it (${c.since})` : `${c.expected}, the connector's ${c.source}`;
  return (
    `topic ${c.topic} has ${c.partitions} partitions, not ${from}: partitions were ${c.partitions > c.expected ? 'added' : 'changed'} outside \`outbox topics:grow\`. ` +
    `Keys that moved to a new partition while older events of theirs were unread may have been applied out of order: check the handlers of those aggregates, and ${advice}`
  );
}
