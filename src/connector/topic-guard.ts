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
export type TopicAdmin = Pick<Admin, 'listTopics' | 'describeConfigs'> & Partial<Pick<Admin, 'describeCluster'>>;

/** Brokers and topic replicas below which one broker's loss can lose events no consumer has read yet. */
export const DURABLE_REPLICAS = 3;

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
 * The loud warning of a deploy whose events would live on one copy. With the CDC outbox cleanup on (the
 * default), the table's copy of an event is deleted once the slot has read it, so from then on the
 * topic's replicas are the only copies of an event no consumer has read yet: with one broker, or
 * topics at replication factor 1, losing that broker's disk loses them for good. Pure.
 * `replicationFactor` -1 is the broker's default.replication.factor (unknown here: judged by the brokers).
 */
export function durabilityWarning(input: { brokers: number; replicationFactor: number; cleanupOn: boolean; bootstrap: string }): string | undefined {
  const { brokers, replicationFactor, cleanupOn, bootstrap } = input;
  const replicas = replicationFactor === -1 ? brokers : Math.min(replicationFactor, brokers);
  if (brokers >= DURABLE_REPLICAS && replicas >= DURABLE_REPLICAS) return undefined;
  const factor = replicationFactor === -1 ? "the broker's default replication factor" : `replication factor ${replicationFactor}`;
  return (
    `EVENTS WOULD LIVE ON ${replicas === 1 ? 'ONE COPY' : `${replicas} COPIES`}: the Kafka cluster at ${bootstrap} has ${brokers} broker(s) and the connector creates its topics with ${factor}. ` +
    `Losing ${replicas === 1 ? 'that broker' : 'those brokers'} loses every event they hold that no consumer has read yet` +
    (cleanupOn ? ', and the outbox cleanup (watchdog.outboxCleanup, on by default) deletes the table\'s copy of each event once the slot has read it, so nothing could publish them again. ' : '. ') +
    `In production run at least ${DURABLE_REPLICAS} brokers and deploy with --replication-factor ${DURABLE_REPLICAS} (topics with min.insync.replicas=2); on a one-broker development stack this is expected.`
  );
}

/**
 * Reads the broker. A broker that cannot be reached is a warning, not a refusal: the check could not
 * run, and Connect itself will fail loudly without Kafka. `replicationFactor` is the connector's
 * `topic.creation.default.replication.factor`.
 */
export async function topicFindings(config: OutboxConfig, admin?: TopicAdmin, replicationFactor?: number): Promise<{ findings: GuardFinding[]; warning?: string; durability?: string }> {
  let own: Admin | undefined;
  try {
    if (!admin) {
      own = createKafka(config, { role: 'connector-deploy', retries: 2 }).admin();
      await own.connect();
    }
    const reader = admin ?? (own as Admin);
    const findings = compactedFindings(await findCompactedTopics(reader, config.connector.topicReplacement));
    const brokers = reader.describeCluster ? (await reader.describeCluster()).brokers.length : undefined;
    const durability =
      brokers === undefined || replicationFactor === undefined
        ? undefined
        : durabilityWarning({ brokers, replicationFactor, cleanupOn: config.watchdog.outboxCleanup.enabled, bootstrap: config.kafka.brokers.join(',') });
    return { findings, ...(durability ? { durability } : {}) };
  } catch (error) {
    return { findings: [], warning: `could not read the cleanup.policy of existing event and dead-letter topics from ${config.kafka.brokers.join(',')}: ${(error as Error).message}` };
  } finally {
    await own?.disconnect().catch(() => {});
  }
}
