/**
 * Deploy guard rail on topics that already exist: a routed event topic or a dead-letter topic with
 * `cleanup.policy` containing `compact` keeps only the latest record per key (aggregate_id), so older
 * events of an aggregate are deleted, read or not. The connector config's own
 * `topic.creation.*.cleanup.policy` is checked in extra-guard.ts; this reads what the broker has.
 */
import { ConfigResourceTypes, type Admin } from 'kafkajs';
import type { OutboxConfig } from '../config';
import { createKafka } from '../kafka';
import { topicNames } from '../topics';
import type { GuardFinding } from './slot-guard';

/** What the check needs of a kafkajs Admin (a boundary unit tests fake). */
export type TopicAdmin = Pick<Admin, 'listTopics' | 'describeConfigs'>;

export interface CompactedTopic {
  topic: string;
  kind: 'event' | 'dead-letter';
  policy: string;
}

/** The existing event and dead-letter topics of this deployment whose cleanup.policy compacts. */
export async function findCompactedTopics(admin: TopicAdmin, topicReplacement: string): Promise<CompactedTopic[]> {
  const { pattern: events, dlqPattern: deadLetters } = topicNames(topicReplacement);
  const ours = (await admin.listTopics())
    .map((topic) => ({ topic, kind: events.test(topic) ? ('event' as const) : deadLetters.test(topic) ? ('dead-letter' as const) : undefined }))
    .filter((t): t is { topic: string; kind: CompactedTopic['kind'] } => t.kind !== undefined);
  if (ours.length === 0) return [];
  const described = await admin.describeConfigs({
    includeSynonyms: false,
    resources: ours.map((t) => ({ type: ConfigResourceTypes.TOPIC, name: t.topic, configNames: ['cleanup.policy'] })),
  });
  const policy = new Map(described.resources.map((r) => [r.resourceName, r.configEntries.find((e) => e.configName === 'cleanup.policy')?.configValue ?? '']));
  return ours
    .map((t) => ({ ...t, policy: policy.get(t.topic) ?? '' }))
    .filter((t) => t.policy.toLowerCase().includes('compact'))
    .sort((a, b) => a.topic.localeCompare(b.topic));
}

export function compactedFindings(topics: readonly CompactedTopic[]): GuardFinding[] {
  return topics.map((t) => ({
    code: 'topic-compacted' as const,
    message:
      `${t.kind === 'event' ? 'Event' : 'Dead-letter'} topic ${t.topic} has cleanup.policy=${t.policy}: compaction keeps only the latest record per key (aggregate_id), ` +
      `so older events of an aggregate are deleted whether or not they were consumed. Set it back: kafka-configs --alter --entity-type topics --entity-name ${t.topic} --add-config cleanup.policy=delete.`,
  }));
}

/**
 * Reads the broker. A broker that cannot be reached is a warning, not a refusal: the check could not
 * run, and Connect itself will fail loudly without Kafka.
 */
export async function topicFindings(config: OutboxConfig, admin?: TopicAdmin): Promise<{ findings: GuardFinding[]; warning?: string }> {
  let own: Admin | undefined;
  try {
    if (!admin) {
      own = createKafka(config, { role: 'connector-deploy', retries: 2 }).admin();
      await own.connect();
    }
    return { findings: compactedFindings(await findCompactedTopics(admin ?? (own as Admin), config.connector.topicReplacement)) };
  } catch (error) {
    return { findings: [], warning: `could not read the cleanup.policy of existing event and dead-letter topics from ${config.kafka.brokers.join(',')}: ${(error as Error).message}` };
  } finally {
    await own?.disconnect().catch(() => {});
  }
}
