/**
 * How many copies an event topic keeps, in one place: the topics the router (dead letters) and the relay
 * (routed topics) create, and the connector's deploy guard over the topics Connect creates or already has.
 *
 * The rule: on a cluster of 3 or more brokers a topic gets replication factor 3 and min.insync.replicas 2,
 * so a write acknowledged with acks=all (the relay's, Connect's source producer's, the router's DLQ
 * producer's) is on two brokers before it counts, and one broker can be lost (or restarted) while writes go
 * on. On a smaller cluster (the one-broker local stack) a topic gets as many replicas as there are brokers
 * and the broker's own min.insync.replicas. With the CDC outbox cleanup on, the table's copy of an event is
 * deleted once the slot has read it, so the topic's replicas are the only copies of an unread event.
 *
 * No Kafka client here (the writer imports src/topics): callers pass what they read from the cluster.
 */
import { OutboxError } from '../errors';

/** Brokers (and replicas) from which the rule asks for durable topics. */
export const DURABLE_REPLICAS = 3;
/** min.insync.replicas of a durable topic: two copies before acks=all is answered, one broker may be down. */
export const DURABLE_MIN_INSYNC = 2;

export interface TopicDurability {
  replicationFactor: number;
  /** undefined: the broker's default applies (nothing set on the topic). */
  minInsyncReplicas?: number;
}

/** Explicit settings win (a user who sets them knows the cluster); what is not set follows the rule. */
export interface DurabilityOverrides {
  replicationFactor?: number;
  minInsyncReplicas?: number;
  /** Names of the settings, for the error message (e.g. `router.dlqReplicationFactor`). */
  names?: { replicationFactor: string; minInsyncReplicas: string };
}

/** The replication of a topic the toolkit creates, on a cluster of `brokers` brokers. */
export function durableTopicSettings(brokers: number, overrides: DurabilityOverrides = {}): TopicDurability {
  const replicationFactor = overrides.replicationFactor ?? Math.max(1, Math.min(DURABLE_REPLICAS, brokers));
  const minInsyncReplicas =
    overrides.minInsyncReplicas ?? (brokers >= DURABLE_REPLICAS && replicationFactor >= DURABLE_MIN_INSYNC ? DURABLE_MIN_INSYNC : undefined);
  if (minInsyncReplicas !== undefined && minInsyncReplicas > replicationFactor) {
    const names = overrides.names ?? { replicationFactor: 'replication factor', minInsyncReplicas: 'min.insync.replicas' };
    // More in-sync replicas than replicas: every acks=all write would fail with NOT_ENOUGH_REPLICAS.
    throw new OutboxError(
      'CONFIG_INVALID',
      `${names.minInsyncReplicas} (${minInsyncReplicas}) is larger than ${names.replicationFactor} (${replicationFactor}): every write with acks=all would be refused (NOT_ENOUGH_REPLICAS). ` +
        `Lower ${names.minInsyncReplicas} or raise ${names.replicationFactor}.`,
      { details: { replicationFactor, minInsyncReplicas } },
    );
  }
  return minInsyncReplicas === undefined ? { replicationFactor } : { replicationFactor, minInsyncReplicas };
}

/** The durability of a topic about to be created: the broker count is read at creation time (creations are rare). */
export async function durabilityForNewTopic(admin: { describeCluster(): Promise<{ brokers: readonly unknown[] }> }, overrides: DurabilityOverrides = {}): Promise<TopicDurability> {
  const { brokers } = await admin.describeCluster();
  return durableTopicSettings(brokers.length, overrides);
}

/** The createTopics configEntries of a durability (min.insync.replicas only when the rule sets it). */
export function durabilityConfigEntries(d: TopicDurability): Array<{ name: string; value: string }> {
  return d.minInsyncReplicas === undefined ? [] : [{ name: 'min.insync.replicas', value: String(d.minInsyncReplicas) }];
}

/** What a guard knows of one existing topic. `minInsyncReplicas`: the effective value (topic-level, else the broker's). */
export interface ExistingTopicReplication {
  topic: string;
  kind: 'event' | 'dead-letter';
  /** The smallest replica count over its partitions. */
  replicationFactor: number;
  minInsyncReplicas: number | null;
}

export interface ReplicationFacts {
  brokers: number;
  /** What Connect will create new routed topics with: topic.creation.default.replication.factor (-1: the broker's default.replication.factor). */
  newTopics: { replicationFactor: number; minInsyncReplicas: number | null; source: string };
  /** The broker defaults (null: could not be read). */
  brokerDefaultReplicationFactor: number | null;
  existing: readonly ExistingTopicReplication[];
}

export type ReplicationProblemKind = 'replication-factor' | 'min-insync-replicas';

export interface ReplicationProblem {
  kind: ReplicationProblemKind;
  /** The topic, or `new topics` for the connector's topic.creation default. */
  topic: string;
  value: number;
  message: string;
}

const alterIsr = (topic: string) => `kafka-configs --bootstrap-server <broker> --alter --entity-type topics --entity-name ${topic} --add-config min.insync.replicas=${DURABLE_MIN_INSYNC}`;

/**
 * What a deploy on this cluster must refuse (without --force): on 3 or more brokers, a routed or
 * dead-letter topic (existing, or as Connect will create it) with fewer than 3 replicas, or with
 * min.insync.replicas below 2. On fewer brokers nothing: the cluster cannot do better. Pure.
 */
export function replicationProblems(facts: ReplicationFacts): ReplicationProblem[] {
  if (facts.brokers < DURABLE_REPLICAS) return [];
  const problems: ReplicationProblem[] = [];
  const { newTopics } = facts;
  const newRf = newTopics.replicationFactor === -1 ? facts.brokerDefaultReplicationFactor : newTopics.replicationFactor;
  if (newRf !== null && newRf < DURABLE_REPLICAS) {
    const how = newTopics.replicationFactor === -1 ? `-1, the brokers' default.replication.factor ${newRf}` : String(newRf);
    problems.push({
      kind: 'replication-factor',
      topic: 'new routed topics',
      value: newRf,
      message:
        `The connector would create routed topics with replication factor ${how} (topic.creation.default.replication.factor) on a cluster of ${facts.brokers} brokers: ` +
        `losing one broker could lose unread events. Deploy with --replication-factor ${DURABLE_REPLICAS}.`,
    });
  }
  if (newTopics.minInsyncReplicas !== null && newTopics.minInsyncReplicas < DURABLE_MIN_INSYNC) {
    problems.push({
      kind: 'min-insync-replicas',
      topic: 'new routed topics',
      value: newTopics.minInsyncReplicas,
      message:
        `New routed topics would get min.insync.replicas=${newTopics.minInsyncReplicas} (${newTopics.source}): an acks=all write would count as done on one broker, which may then be lost. ` +
        `Deploy with --set topic.creation.default.min.insync.replicas=${DURABLE_MIN_INSYNC}, or set min.insync.replicas=${DURABLE_MIN_INSYNC} on the brokers ` +
        `(kafka-configs --bootstrap-server <broker> --alter --entity-type brokers --entity-default --add-config min.insync.replicas=${DURABLE_MIN_INSYNC}).`,
    });
  }
  for (const t of facts.existing) {
    const what = t.kind === 'event' ? 'Routed topic' : 'Dead-letter topic';
    if (t.replicationFactor < DURABLE_REPLICAS) {
      problems.push({
        kind: 'replication-factor',
        topic: t.topic,
        value: t.replicationFactor,
        message:
          `${what} ${t.topic} has replication factor ${t.replicationFactor} on a cluster of ${facts.brokers} brokers: losing one broker could lose unread events. ` +
          `Reassign it to ${DURABLE_REPLICAS} replicas (kafka-reassign-partitions --bootstrap-server <broker> --reassignment-json-file <plan> --execute, ` +
          `a plan listing ${DURABLE_REPLICAS} broker ids per partition).`,
      });
    }
    if (t.minInsyncReplicas !== null && t.minInsyncReplicas < DURABLE_MIN_INSYNC) {
      problems.push({
        kind: 'min-insync-replicas',
        topic: t.topic,
        value: t.minInsyncReplicas,
        message: `${what} ${t.topic} has min.insync.replicas=${t.minInsyncReplicas}: an acks=all write counts as done on one broker, which may then be lost. Set it: ${alterIsr(t.topic)}.`,
      });
    }
  }
  return problems;
}

/** The refusal of a deploy: every problem, the fixes, and --force. */
export function replicationRefusal(connector: string, problems: readonly ReplicationProblem[]): OutboxError {
  return new OutboxError(
    'TOPIC_REPLICATION_UNSAFE',
    `Refusing to deploy connector ${connector}: its topics would not survive the loss of one broker; nothing was deployed:\n` +
      `${problems.map((p) => `  - ${p.message}`).join('\n')}\n` +
      'Fix it as described, or deploy with --force (force: true) to accept topics that a single broker failure can lose.',
    { details: { problems: problems.map(({ kind, topic, value }) => ({ kind, topic, value })) } },
  );
}
