/**
 * Deploy guard rails on topics: a routed event topic or a dead-letter topic with `cleanup.policy`
 * containing `compact` keeps only the latest record per key (aggregate_id), so older events of an
 * aggregate are deleted, read or not; and on a cluster of 3+ brokers, topics (existing, or as Connect
 * will create them) with fewer than 3 replicas or min.insync.replicas below 2 (the rule and its refusal:
 * src/topics/replication.ts). The connector config's own `topic.creation.*.cleanup.policy` is checked in
 * extra-guard.ts; this reads what the broker has.
 */
import { ConfigResourceTypes, type Admin } from 'kafkajs';
import type { OutboxConfig } from '../config';
import { createKafka } from '../kafka';
import { topicNames } from '../topics';
import { routedPartitionCounts } from '../topics/partition-record';
import { DURABLE_REPLICAS, replicationProblems, type ExistingTopicReplication, type ReplicationFacts, type ReplicationProblem } from '../topics/replication';
import type { GuardFinding } from './slot-guard';

/** What the check needs of a kafkajs Admin (a boundary unit tests fake). */
export type TopicAdmin = Pick<Admin, 'listTopics' | 'describeConfigs'> & Partial<Pick<Admin, 'describeCluster' | 'fetchTopicMetadata'>>;

export { DURABLE_REPLICAS };

export interface CompactedTopic {
  topic: string;
  kind: 'event' | 'dead-letter';
  policy: string;
}

/** The existing event and dead-letter topics of this deployment whose cleanup.policy compacts. */
/** The existing routed and dead-letter topics of this deployment. */
async function ourTopics(admin: Pick<TopicAdmin, 'listTopics'>, topicReplacement: string): Promise<Array<{ topic: string; kind: CompactedTopic['kind'] }>> {
  const { pattern: events, dlqPattern: deadLetters } = topicNames(topicReplacement);
  return (await admin.listTopics())
    .map((topic) => ({ topic, kind: events.test(topic) ? ('event' as const) : deadLetters.test(topic) ? ('dead-letter' as const) : undefined }))
    .filter((t): t is { topic: string; kind: CompactedTopic['kind'] } => t.kind !== undefined);
}

export async function findCompactedTopics(admin: TopicAdmin, topicReplacement: string): Promise<CompactedTopic[]> {
  const ours = await ourTopics(admin, topicReplacement);
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

/** What the connector's config says about the topics Connect creates (topic.creation.default.*). */
export interface TopicCreation {
  /** -1: the brokers' default.replication.factor. */
  replicationFactor: number;
  /** topic.creation.default.min.insync.replicas, when set (else the brokers' min.insync.replicas applies). */
  minInsyncReplicas?: number;
}

const configValue = (entries: ReadonlyArray<{ configName: string; configValue: string | null }>, name: string): number | null => {
  const raw = entries.find((e) => e.configName === name)?.configValue;
  return raw === undefined || raw === null || raw === '' ? null : Number(raw);
};

/**
 * Reads what the replication rule judges (src/topics/replication.ts): the brokers' defaults, and per
 * existing routed or dead-letter topic its smallest replica count and effective min.insync.replicas
 * (a topic's DescribeConfigs answers the broker's value where the topic sets none).
 */
export async function readReplicationFacts(
  admin: Required<Pick<TopicAdmin, 'listTopics' | 'describeConfigs' | 'fetchTopicMetadata'>>,
  o: { topicReplacement: string; brokerIds: readonly number[]; creation: TopicCreation },
): Promise<ReplicationFacts> {
  const described = await admin.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.BROKER, name: String(o.brokerIds[0] ?? 0), configNames: ['default.replication.factor', 'min.insync.replicas'] }],
  });
  const brokerEntries = described.resources[0]?.configEntries ?? [];
  const brokerMinIsr = configValue(brokerEntries, 'min.insync.replicas');
  const ours = await ourTopics(admin, o.topicReplacement);
  const existing: ExistingTopicReplication[] = [];
  if (ours.length > 0) {
    const { topics } = await admin.fetchTopicMetadata({ topics: ours.map((t) => t.topic) });
    const replicas = new Map(topics.map((t) => [t.name, Math.min(...t.partitions.map((p) => p.replicas.length))]));
    const configs = await admin.describeConfigs({
      includeSynonyms: false,
      resources: ours.map((t) => ({ type: ConfigResourceTypes.TOPIC, name: t.topic, configNames: ['min.insync.replicas'] })),
    });
    const isr = new Map(configs.resources.map((r) => [r.resourceName, configValue(r.configEntries, 'min.insync.replicas')]));
    for (const t of ours) existing.push({ ...t, replicationFactor: replicas.get(t.topic) ?? 0, minInsyncReplicas: isr.get(t.topic) ?? brokerMinIsr });
  }
  const ownIsr = o.creation.minInsyncReplicas;
  return {
    brokers: o.brokerIds.length,
    brokerDefaultReplicationFactor: configValue(brokerEntries, 'default.replication.factor'),
    newTopics:
      ownIsr !== undefined
        ? { replicationFactor: o.creation.replicationFactor, minInsyncReplicas: ownIsr, source: 'topic.creation.default.min.insync.replicas' }
        : { replicationFactor: o.creation.replicationFactor, minInsyncReplicas: brokerMinIsr, source: "the brokers' min.insync.replicas, which Connect's topic creation inherits" },
    existing,
  };
}

export interface TopicCheck {
  findings: GuardFinding[];
  /** A check that could not run. */
  warning?: string;
  durability?: string;
  /** On a cluster of 3+ brokers: what the replication rule refuses (src/topics/replication.ts). */
  replication: ReplicationProblem[];
  /** Each existing routed topic's partition count (absent when the broker could not be read). */
  partitions?: Map<string, number>;
}

/**
 * Reads the broker. A broker that cannot be reached is a warning, not a refusal: the check could not
 * run, and Connect itself will fail loudly without Kafka. `creation` is the connector's
 * `topic.creation.default.*`. On fewer than 3 brokers the replication rule asks for nothing, and
 * nothing more is read.
 */
export async function topicFindings(config: OutboxConfig, admin?: TopicAdmin, creation?: TopicCreation): Promise<TopicCheck> {
  let own: Admin | undefined;
  try {
    if (!admin) {
      own = createKafka(config, { role: 'connector-deploy', retries: 2 }).admin();
      await own.connect();
    }
    const reader = admin ?? (own as Admin);
    const findings = compactedFindings(await findCompactedTopics(reader, config.connector.topicReplacement));
    const cluster = reader.describeCluster ? await reader.describeCluster() : undefined;
    const brokers = cluster?.brokers.length;
    const durability =
      brokers === undefined || creation === undefined
        ? undefined
        : durabilityWarning({ brokers, replicationFactor: creation.replicationFactor, cleanupOn: config.watchdog.outboxCleanup.enabled, bootstrap: config.kafka.brokers.join(',') });
    let replication: ReplicationProblem[] = [];
    if (cluster && creation && reader.fetchTopicMetadata && cluster.brokers.length >= DURABLE_REPLICAS) {
      const facts = await readReplicationFacts(reader as Required<TopicAdmin>, {
        topicReplacement: config.connector.topicReplacement,
        brokerIds: cluster.brokers.map((b) => b.nodeId).sort((a, b) => a - b),
        creation,
      });
      replication = replicationProblems(facts);
    }
    const partitions = reader.fetchTopicMetadata ? await routedPartitionCounts(reader as Required<TopicAdmin>, config.connector.topicReplacement) : undefined;
    return { findings, replication, ...(durability ? { durability } : {}), ...(partitions ? { partitions } : {}) };
  } catch (error) {
    return {
      findings: [],
      replication: [],
      warning: `could not read the cleanup.policy and replication of existing event and dead-letter topics from ${config.kafka.brokers.join(',')}: ${(error as Error).message}`,
    };
  } finally {
    await own?.disconnect().catch(() => {});
  }
}
