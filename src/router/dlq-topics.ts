import type { Admin } from 'kafkajs';
import { durabilityConfigEntries, durabilityForNewTopic } from '../topics/replication';
import type { RouterRuntime } from './runtime';

export interface DlqTopics {
  /** Each routed topic's DLQ (see ensure). */
  ensureFor(sources: readonly string[]): Promise<void>;
  /**
   * dead-letter topic → its routed (source) topic: each created explicitly (idempotently). The DLQ holds
   * the only copy of a dead letter, so it keeps it forever by default (dlqRetentionMs), with the
   * replication rule's replicas and min.insync.replicas (src/topics/replication.ts; dlqReplicationFactor
   * and dlqMinInsyncReplicas override it) and the source's partition count (a key's dead letters stay in
   * one partition, in order).
   */
  ensure(wanted: Map<string, string>): Promise<void>;
}

export function createDlqTopics(rt: RouterRuntime): DlqTopics {
  const { settings } = rt;
  /** Dead-letter topics known to exist (created by this router or found). */
  const known = new Set<string>();

  async function ensure(wanted: Map<string, string>): Promise<void> {
    const admin = rt.admin as Admin;
    for (const dlq of wanted.keys()) if (known.has(dlq)) wanted.delete(dlq);
    if (wanted.size === 0) return;
    const existing = new Set(await admin.listTopics());
    for (const dlq of [...wanted.keys()].filter((d) => existing.has(d))) {
      known.add(dlq);
      wanted.delete(dlq);
    }
    if (wanted.size === 0) return;
    const { topics } = await admin.fetchTopicMetadata({ topics: [...new Set(wanted.values())] });
    const partitionsOf = new Map(topics.map((t) => [t.name, t.partitions.length]));
    const durability = await durabilityForNewTopic(admin, {
      replicationFactor: settings.dlqReplicationFactor,
      minInsyncReplicas: settings.dlqMinInsyncReplicas,
      names: { replicationFactor: 'router.dlqReplicationFactor', minInsyncReplicas: 'router.dlqMinInsyncReplicas' },
    });
    // createTopics answers false (no error) for a topic that already exists, e.g. made by another replica.
    await admin.createTopics({
      waitForLeaders: true,
      topics: [...wanted].map(([dlq, source]) => ({
        topic: dlq,
        numPartitions: partitionsOf.get(source) ?? 1,
        replicationFactor: durability.replicationFactor,
        configEntries: [{ name: 'retention.ms', value: String(settings.dlqRetentionMs) }, ...durabilityConfigEntries(durability)],
      })),
    });
    for (const [dlq, source] of wanted) {
      known.add(dlq);
      rt.logger.info({ event: 'router.dlq-created', topic: dlq, source, partitions: partitionsOf.get(source) ?? 1, retentionMs: settings.dlqRetentionMs, ...durability }, 'router.dlq-created');
    }
  }

  return {
    ensure,
    ensureFor: (sources) => ensure(new Map(sources.map((t) => [rt.dlqTopicFor(t, rt.aggregateTypeOf(t)), t] as const))),
  };
}
