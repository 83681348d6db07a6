/**
 * The boundaries of `outbox kafka:acls` on a real broker that denies whatever no ACL allows (the secure
 * profile: StandardAuthorizer, allow.everyone.if.no.acl.found=false). Two consumers with their own
 * principals and topics; each principal is tried at what its plan grants and at what it must not do.
 */
import { randomUUID } from 'node:crypto';
import type { Consumer, Kafka } from 'kafkajs';
import { routerGroupId } from '../../src/acls';
import { outboxConfigSchema, type OutboxConfig } from '../../src/config';
import { randomName } from '../support/stack-env';
import { applyAclsFor, describeSecure, secureKafka, withSecureAdminClient } from '../support/secure-env';

jest.setTimeout(120_000);

/**
 * The Kafka error types (e.g. TOPIC_AUTHORIZATION_FAILED) in a kafkajs error's chain, else the error
 * names. kafkajs 2.2.4 turns FindCoordinator's GROUP_AUTHORIZATION_FAILED into
 * KafkaJSGroupCoordinatorNotFound ("Failed to find group coordinator"): that is how a client without
 * Read on a group sees it, and why the positive controls below read with the right principal.
 */
function kafkaErrorTypes(error: unknown): string[] {
  const types: string[] = [];
  let e = error as { type?: string; cause?: unknown; originalError?: unknown; errors?: unknown[] } | undefined;
  for (let depth = 0; e && depth < 6; depth++) {
    if (e.type) types.push(e.type);
    else if ((e as { name?: string }).name) types.push(String((e as { name?: string }).name));
    for (const inner of e.errors ?? []) types.push(...kafkaErrorTypes(inner));
    e = (e.cause ?? e.originalError) as typeof e;
  }
  return types;
}

async function failure(work: Promise<unknown>): Promise<string[]> {
  try {
    await work;
  } catch (error) {
    return kafkaErrorTypes(error);
  }
  return ['(no error: the broker allowed it)'];
}

/** What a consumer gets when it reads `topic` in `groupId`: 'read' with the values, or the error types of its crash. */
async function consumeAs(kafka: Kafka, groupId: string, topic: string): Promise<string[]> {
  const consumer: Consumer = kafka.consumer({ groupId, retry: { retries: 0 } });
  try {
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    return await new Promise<string[]>((resolve) => {
      const timer = setTimeout(() => resolve(['(nothing read, no error)']), 30_000);
      consumer.on(consumer.events.CRASH, (e) => {
        clearTimeout(timer);
        resolve(kafkaErrorTypes(e.payload.error));
      });
      void consumer.run({
        eachMessage: async ({ message }) => {
          clearTimeout(timer);
          resolve([`read ${message.value?.toString()}`]);
        },
      }).catch((e: unknown) => {
        clearTimeout(timer);
        resolve(kafkaErrorTypes(e));
      });
    });
  } catch (error) {
    return kafkaErrorTypes(error);
  } finally {
    await consumer.disconnect().catch(() => {});
  }
}

describeSecure('secure-acls')('Kafka ACLs from `outbox kafka:acls`, enforced by the broker', () => {
  const run = randomName('a').replace(/-/g, '');
  const configFor = (name: string, routerPrincipal: string): OutboxConfig =>
    outboxConfigSchema.parse({
      database: { port: 56432 },
      connector: { topicReplacement: `${run}${name}.outbox.event.\${routedByValue}`, topicPrefix: `${run}${name}` },
      router: { consumer: `c-${run}-${name}` },
      acls: { routerPrincipal },
    });
  const a = configFor('a', 'User:outbox-router');
  const b = configFor('b', 'User:outbox-router-b');
  const routed = (c: OutboxConfig) => c.connector.topicReplacement.replace('${routedByValue}', 'order');
  const dlq = (c: OutboxConfig) => routed(c).replace('.outbox.event.', '.outbox.dlq.');

  beforeAll(async () => {
    await applyAclsFor(a);
    await applyAclsFor(b);
    await withSecureAdminClient(async (admin) => {
      await admin.createTopics({ waitForLeaders: true, topics: [routed(a), dlq(a), routed(b), dlq(b)].map((topic) => ({ topic, numPartitions: 1 })) });
      const producer = secureKafka('outbox-admin').producer();
      await producer.connect();
      for (const topic of [routed(a), dlq(a), routed(b), dlq(b)]) await producer.send({ topic, messages: [{ key: 'k', value: `${topic}-${randomUUID()}` }] });
      await producer.disconnect();
    });
  });

  it('the router reads its routed topic in its own group, and may not produce to a routed topic', async () => {
    const router = secureKafka('outbox-router');
    expect((await consumeAs(router, routerGroupId(a), routed(a)))[0]).toMatch(new RegExp(`^read ${routed(a)}-`));
    const producer = router.producer({ retry: { retries: 0 } });
    await producer.connect();
    try {
      expect(await failure(producer.send({ topic: routed(a), messages: [{ key: 'k', value: 'forged' }] }))).toContain('TOPIC_AUTHORIZATION_FAILED');
    } finally {
      await producer.disconnect();
    }
  });

  it('one consumer\'s principal may not join another consumer\'s group nor read its dead letters', async () => {
    const routerA = secureKafka('outbox-router');
    // A's own topic, B's group: the group is what is refused.
    expect(await consumeAs(routerA, routerGroupId(b), routed(a))).toContain('KafkaJSGroupCoordinatorNotFound');
    expect(await consumeAs(routerA, routerGroupId(a), routed(b))).toContain('TOPIC_AUTHORIZATION_FAILED');
    expect(await consumeAs(routerA, routerGroupId(a), dlq(b))).toContain('TOPIC_AUTHORIZATION_FAILED');
    // …while B reads its own.
    expect((await consumeAs(secureKafka('outbox-router-b'), routerGroupId(b), routed(b)))[0]).toMatch(/^read /);
  });

  it('the relay produces to routed topics and may not consume', async () => {
    const relay = secureKafka('outbox-relay');
    const producer = relay.producer({ retry: { retries: 0 } });
    await producer.connect();
    try {
      const [meta] = await producer.send({ topic: routed(a), acks: -1, messages: [{ key: 'k', value: 'from the relay' }] });
      expect(meta?.errorCode).toBe(0);
    } finally {
      await producer.disconnect();
    }
    expect(await consumeAs(relay, `g-${run}-relay`, routed(a))).toContain('KafkaJSGroupCoordinatorNotFound');
    // Even in the router's own group, the relay may not read.
    expect(await consumeAs(relay, routerGroupId(a), routed(a))).toContain('KafkaJSGroupCoordinatorNotFound');
  });

  it('outbox status describes topics and groups, and may not write', async () => {
    const status = secureKafka('outbox-status');
    const admin = status.admin();
    await admin.connect();
    try {
      const offsets = await admin.fetchTopicOffsets(routed(a));
      expect(Number(offsets[0]?.high)).toBeGreaterThan(0);
      const groups = await admin.describeGroups([routerGroupId(a)]);
      expect(groups.groups[0]?.groupId).toBe(routerGroupId(a));
      expect(await failure(admin.createTopics({ topics: [{ topic: `${run}a.outbox.event.forged` }] }))).toContain('TOPIC_AUTHORIZATION_FAILED');
    } finally {
      await admin.disconnect();
    }
    const producer = status.producer({ retry: { retries: 0 } });
    await producer.connect();
    try {
      expect(await failure(producer.send({ topic: routed(a), messages: [{ key: 'k', value: 'forged' }] }))).toContain('TOPIC_AUTHORIZATION_FAILED');
    } finally {
      await producer.disconnect();
    }
  });
});
