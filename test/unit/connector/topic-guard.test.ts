/** src/connector/topic-guard.ts: existing event and dead-letter topics that compact. Fakes the Kafka admin (a boundary). */
import { ConfigResourceTypes } from 'kafkajs';
import { loadConfig } from '../../../src/config';
import { compactedFindings, durabilityWarning, findCompactedTopics, readReplicationFacts, topicFindings, type TopicAdmin } from '../../../src/connector/topic-guard';
import { topicNames } from '../../../src/topics';

function fakeAdmin(policies: Record<string, string>): TopicAdmin & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    listTopics: async () => Object.keys(policies),
    describeConfigs: (async ({ resources }: { resources: Array<{ type: number; name: string }> }) => {
      for (const r of resources) {
        expect(r.type).toBe(ConfigResourceTypes.TOPIC);
        asked.push(r.name);
      }
      return {
        throttleTime: 0,
        resources: resources.map((r) => ({ resourceName: r.name, resourceType: r.type, errorCode: 0, errorMessage: null, configEntries: [{ configName: 'cleanup.policy', configValue: policies[r.name] }] })),
      };
    }) as unknown as TopicAdmin['describeConfigs'],
  };
}

describe('existing topics with a compacting cleanup.policy', () => {
  it('turns the routed-topic template into an anchored pattern', () => {
    expect(topicNames('t1.outbox.event.${routedByValue}').pattern.test('t1.outbox.event.order')).toBe(true);
    expect(topicNames('t1.outbox.event.${routedByValue}').pattern.test('xt1.outbox.event.order')).toBe(false);
    expect(topicNames('events-${routedByValue}-v1').pattern.test('events-order-v1')).toBe(true);
  });

  it('finds compacted event and dead-letter topics of this deployment only', async () => {
    const admin = fakeAdmin({
      'outbox.event.order': 'delete',
      'outbox.event.invoice': 'compact',
      'outbox.dlq.order': 'compact,delete',
      'other.topic': 'compact',
      __consumer_offsets: 'compact',
    });
    const found = await findCompactedTopics(admin, 'outbox.event.${routedByValue}');
    expect(found).toEqual([
      { topic: 'outbox.dlq.order', kind: 'dead-letter', policy: 'compact,delete' },
      { topic: 'outbox.event.invoice', kind: 'event', policy: 'compact' },
    ]);
    expect(admin.asked.sort()).toEqual(['outbox.dlq.order', 'outbox.event.invoice', 'outbox.event.order']);
    const [finding] = compactedFindings(found);
    expect(finding).toMatchObject({ code: 'topic-compacted' });
    expect(finding?.message).toMatch(/Dead-letter topic outbox\.dlq\.order has cleanup\.policy=compact,delete: .*older events of an aggregate are deleted/);
    expect(finding?.message).toContain('cleanup.policy=delete');
  });

  it('asks nothing when no topic of the deployment exists yet', async () => {
    const admin = fakeAdmin({ 'other.topic': 'compact' });
    expect(await findCompactedTopics(admin, 'outbox.event.${routedByValue}')).toEqual([]);
    expect(admin.asked).toEqual([]);
  });
});

describe('the durability warning of a deploy', () => {
  const bootstrap = 'k1:9092';
  it('is silent with three brokers and topics at replication factor 3 (or the broker default there)', () => {
    expect(durabilityWarning({ brokers: 3, replicationFactor: 3, cleanupOn: true, bootstrap })).toBeUndefined();
    expect(durabilityWarning({ brokers: 5, replicationFactor: -1, cleanupOn: true, bootstrap })).toBeUndefined();
  });

  it('names one copy, the broker count and the cleanup on a one-broker cluster', () => {
    const w = durabilityWarning({ brokers: 1, replicationFactor: 1, cleanupOn: true, bootstrap });
    expect(w).toMatch(/^EVENTS WOULD LIVE ON ONE COPY: the Kafka cluster at k1:9092 has 1 broker\(s\)/);
    expect(w).toContain('outbox cleanup');
    expect(w).toContain('--replication-factor 3');
  });

  it('counts the copies a replication factor below the broker count leaves, and leaves the cleanup out when it is off', () => {
    const w = durabilityWarning({ brokers: 3, replicationFactor: 1, cleanupOn: false, bootstrap });
    expect(w).toMatch(/ONE COPY: .* has 3 broker\(s\) and the connector creates its topics with replication factor 1/);
    expect(w).not.toContain('outbox cleanup');
    expect(durabilityWarning({ brokers: 2, replicationFactor: -1, cleanupOn: true, bootstrap })).toMatch(/^EVENTS WOULD LIVE ON 2 COPIES/);
  });
});

describe('the replication guard reads the cluster only where it applies', () => {
  /** A cluster of `brokers` brokers with these topics: name → [replicas per partition, min.insync.replicas or undefined for the broker's]. */
  function clusterAdmin(brokers: number, topics: Record<string, [number, number | undefined]>, brokerMinIsr = '1', brokerRf = '1'): TopicAdmin & { calls: string[] } {
    const calls: string[] = [];
    return {
      calls,
      listTopics: async () => Object.keys(topics),
      describeCluster: (async () => {
        calls.push('describeCluster');
        return { brokers: Array.from({ length: brokers }, (_, i) => ({ nodeId: i + 1, host: 'h', port: 9092 })), controller: 1, clusterId: 'c' };
      }) as unknown as TopicAdmin['describeCluster'],
      fetchTopicMetadata: (async ({ topics: names }: { topics: string[] }) => {
        calls.push('fetchTopicMetadata');
        return { topics: names.map((name) => ({ name, partitions: [{ partitionId: 0, replicas: Array.from({ length: topics[name]?.[0] ?? 1 }, (_, i) => i) }] })) };
      }) as unknown as TopicAdmin['fetchTopicMetadata'],
      describeConfigs: (async ({ resources }: { resources: Array<{ type: ConfigResourceTypes; name: string; configNames: string[] }> }) => {
        calls.push(`describeConfigs:${resources.map((r) => r.type).join(',')}`);
        return {
          throttleTime: 0,
          resources: resources.map((r) => ({
            resourceName: r.name,
            resourceType: r.type,
            errorCode: 0,
            errorMessage: null,
            configEntries:
              r.type === ConfigResourceTypes.BROKER
                ? [{ configName: 'min.insync.replicas', configValue: brokerMinIsr }, { configName: 'default.replication.factor', configValue: brokerRf }]
                : r.configNames.map((configName) => ({ configName, configValue: configName === 'cleanup.policy' ? 'delete' : String(topics[r.name]?.[1] ?? brokerMinIsr) })),
          })),
        };
      }) as unknown as TopicAdmin['describeConfigs'],
    };
  }
  const config = loadConfig({ env: {} });

  it('on one broker: no replication facts are read and nothing is refused', async () => {
    const admin = clusterAdmin(1, { 'outbox.event.order': [1, undefined] });
    const check = await topicFindings(config, admin, { replicationFactor: 1 });
    expect(check.replication).toEqual([]);
    // Read once, for the routed topics' partition counts the deploy records (src/topics/partition-record.ts).
    expect(admin.calls.filter((c) => c === 'fetchTopicMetadata')).toHaveLength(1);
    expect(check.partitions).toEqual(new Map([['outbox.event.order', 1]]));
    expect(admin.calls.filter((c) => c.includes(String(ConfigResourceTypes.BROKER)))).toEqual([]);
    expect(check.durability).toMatch(/^EVENTS WOULD LIVE ON ONE COPY/);
  });

  it("on 3 brokers: existing topics' replicas and effective min.insync.replicas, and the new topics' settings", async () => {
    const admin = clusterAdmin(3, { 'outbox.event.order': [3, 2], 'outbox.dlq.order': [1, undefined], 'other.topic': [1, 1] });
    const facts = await readReplicationFacts(admin as Required<TopicAdmin>, { topicReplacement: 'outbox.event.${routedByValue}', brokerIds: [1, 2, 3], creation: { replicationFactor: 3 } });
    expect(facts.existing).toEqual([
      { topic: 'outbox.event.order', kind: 'event', replicationFactor: 3, minInsyncReplicas: 2 },
      { topic: 'outbox.dlq.order', kind: 'dead-letter', replicationFactor: 1, minInsyncReplicas: 1 },
    ]);
    expect(facts.newTopics).toMatchObject({ replicationFactor: 3, minInsyncReplicas: 1 });
    const check = await topicFindings(config, admin, { replicationFactor: 3, minInsyncReplicas: 2 });
    expect(check.replication.map((p) => [p.kind, p.topic])).toEqual([
      ['replication-factor', 'outbox.dlq.order'],
      ['min-insync-replicas', 'outbox.dlq.order'],
    ]);
  });
});
