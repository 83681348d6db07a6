import type { Admin } from 'kafkajs';
import type { OutboxConfig } from '../config';
import { createConnectClient } from '../connector/connect-client';
import { clientConfig, withClient } from '../db';
import { partitionChanges, readRecordedPartitions, routedPartitionCounts } from '../topics/partition-record';
import type { TopicPartitionsData } from './types';

/**
 * The routed topics' partition counts against what the toolkit recorded (connector:deploy, topics:grow;
 * migration 014), or, for a topic the connector created after its deploy, its topic.creation.default.partitions.
 * The comparison itself is src/topics/partition-record.ts; a change is a warning (verdict.ts).
 */
export async function readTopicPartitions(config: OutboxConfig, admin: Pick<Admin, 'listTopics' | 'fetchTopicMetadata'>, timeoutMs: number): Promise<TopicPartitionsData> {
  const settings = clientConfig(config.database, { application_name: 'outbox-router status', connectionTimeoutMillis: timeoutMs, statement_timeout: timeoutMs });
  const connect = createConnectClient({ ...config.connect, requestTimeoutMs: timeoutMs }, { retry: { attempts: 1 } });
  const [current, recorded, stored] = await Promise.all([
    routedPartitionCounts(admin, config.connector.topicReplacement),
    withClient(settings, (client) => readRecordedPartitions(client, config.outbox)),
    // Not deployed, or Connect unreachable (the connector section says which): no creation default to compare with.
    connect.getConfig(config.connector.name).catch(() => undefined),
  ]);
  const creation = Number(stored?.['topic.creation.default.partitions'] ?? Number.NaN);
  const creationDefault = Number.isInteger(creation) && creation > 0 ? creation : null;
  const byTopic = new Map((recorded ?? []).map((r) => [r.topic, r]));
  return {
    recorded: recorded !== null,
    creationDefault,
    topics: [...current].map(([topic, partitions]) => ({ topic, partitions, recorded: byTopic.get(topic)?.partitions ?? null })),
    changes: partitionChanges(current, recorded ?? [], creationDefault ?? undefined),
  };
}
