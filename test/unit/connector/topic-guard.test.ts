/** src/connector/topic-guard.ts: existing event and dead-letter topics that compact. Fakes the Kafka admin (a boundary). */
import { ConfigResourceTypes } from 'kafkajs';
import { compactedFindings, findCompactedTopics, type TopicAdmin } from '../../../src/connector/topic-guard';
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
