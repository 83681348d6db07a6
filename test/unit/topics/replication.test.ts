/** src/topics/replication.ts: the one replication rule, and what a deploy refuses by it. Pure. */
import { durabilityConfigEntries, durabilityForNewTopic, durableTopicSettings, replicationProblems, replicationRefusal, type ReplicationFacts } from '../../../src/topics/replication';
import { thrown } from '../../support/expect-error';

describe('the replication of topics the toolkit creates', () => {
  it('follows the brokers: one copy on one broker, 3 replicas and min.insync.replicas 2 from 3 brokers on', () => {
    expect(durableTopicSettings(1)).toEqual({ replicationFactor: 1 });
    expect(durableTopicSettings(2)).toEqual({ replicationFactor: 2 });
    expect(durableTopicSettings(3)).toEqual({ replicationFactor: 3, minInsyncReplicas: 2 });
    expect(durableTopicSettings(5)).toEqual({ replicationFactor: 3, minInsyncReplicas: 2 });
    expect(durabilityConfigEntries(durableTopicSettings(1))).toEqual([]);
    expect(durabilityConfigEntries(durableTopicSettings(3))).toEqual([{ name: 'min.insync.replicas', value: '2' }]);
  });

  it('lets explicit settings win, and refuses more in-sync replicas than replicas, naming the settings', () => {
    expect(durableTopicSettings(3, { replicationFactor: 1 })).toEqual({ replicationFactor: 1 });
    expect(durableTopicSettings(5, { replicationFactor: 5, minInsyncReplicas: 3 })).toEqual({ replicationFactor: 5, minInsyncReplicas: 3 });
    const error = thrown(() =>
      durableTopicSettings(3, { replicationFactor: 2, minInsyncReplicas: 3, names: { replicationFactor: 'relay.topicReplicationFactor', minInsyncReplicas: 'relay.topicMinInsyncReplicas' } }),
    );
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toMatch(/relay\.topicMinInsyncReplicas \(3\) is larger than relay\.topicReplicationFactor \(2\)/);
  });

  it('reads the broker count at creation time', async () => {
    const admin = { describeCluster: async () => ({ brokers: [{}, {}, {}] }) };
    await expect(durabilityForNewTopic(admin)).resolves.toEqual({ replicationFactor: 3, minInsyncReplicas: 2 });
  });
});

describe('what connector:deploy refuses on a cluster', () => {
  const facts = (over: Partial<ReplicationFacts> = {}): ReplicationFacts => ({
    brokers: 3,
    newTopics: { replicationFactor: 3, minInsyncReplicas: 2, source: 'topic.creation.default.min.insync.replicas' },
    brokerDefaultReplicationFactor: 1,
    existing: [],
    ...over,
  });

  it('asks nothing of a cluster of fewer than 3 brokers (the one-node stack deploys as before)', () => {
    expect(replicationProblems(facts({ brokers: 1, newTopics: { replicationFactor: 1, minInsyncReplicas: 1, source: 'x' } }))).toEqual([]);
    expect(replicationProblems(facts({ brokers: 2, existing: [{ topic: 'outbox.event.a', kind: 'event', replicationFactor: 1, minInsyncReplicas: 1 }] }))).toEqual([]);
  });

  it('accepts 3 replicas with min.insync.replicas 2', () => {
    expect(replicationProblems(facts({ existing: [{ topic: 'outbox.dlq.a', kind: 'dead-letter', replicationFactor: 3, minInsyncReplicas: 2 }] }))).toEqual([]);
  });

  it("refuses the connector's replication factor below 3, and -1 when the brokers' default is below 3", () => {
    const [low] = replicationProblems(facts({ newTopics: { replicationFactor: 1, minInsyncReplicas: 2, source: 's' } }));
    expect(low).toMatchObject({ kind: 'replication-factor', topic: 'new routed topics', value: 1 });
    expect(low?.message).toContain('--replication-factor 3');
    const [byDefault] = replicationProblems(facts({ newTopics: { replicationFactor: -1, minInsyncReplicas: 2, source: 's' }, brokerDefaultReplicationFactor: 2 }));
    expect(byDefault).toMatchObject({ kind: 'replication-factor', value: 2 });
    expect(replicationProblems(facts({ newTopics: { replicationFactor: -1, minInsyncReplicas: 2, source: 's' }, brokerDefaultReplicationFactor: 3 }))).toEqual([]);
  });

  it("refuses min.insync.replicas below 2 for new topics (the brokers' default) and existing ones, naming the fix", () => {
    const problems = replicationProblems(
      facts({
        newTopics: { replicationFactor: 3, minInsyncReplicas: 1, source: "the brokers' min.insync.replicas" },
        existing: [{ topic: 'outbox.event.order', kind: 'event', replicationFactor: 1, minInsyncReplicas: 1 }],
      }),
    );
    expect(problems.map((p) => [p.kind, p.topic, p.value])).toEqual([
      ['min-insync-replicas', 'new routed topics', 1],
      ['replication-factor', 'outbox.event.order', 1],
      ['min-insync-replicas', 'outbox.event.order', 1],
    ]);
    expect(problems[0]?.message).toContain('topic.creation.default.min.insync.replicas=2');
    expect(problems[2]?.message).toContain('--entity-name outbox.event.order --add-config min.insync.replicas=2');
    const error = replicationRefusal('outbox-connector', problems);
    expect(error.code).toBe('TOPIC_REPLICATION_UNSAFE');
    expect(error.message).toContain('--force');
    expect(error.message).toContain('outbox.event.order has replication factor 1');
    expect(error.details.problems).toHaveLength(3);
  });
});
