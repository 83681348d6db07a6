/**
 * The native stack's cluster profile (`stack up --profile cluster`): three KRaft brokers and two Connect
 * workers. Runs only when the stack runs that profile; CI starts it for a cluster pass.
 */
import { Kafka, logLevel, Partitioners, type Admin, type ITopicMetadata } from 'kafkajs';
import { createStack } from '../../scripts/stack';
import { CLUSTER, CLUSTER_BROKERS, KAFKA } from '../../scripts/stack/settings';
import { randomName } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

const stack = createStack();
const onCluster = stack.profile === 'cluster';
if (!onCluster) {
  process.stderr.write(`[cluster-stack] skipped: the stack in ${stack.paths.stateDir} runs the ${stack.profile} profile; \`npm run stack:up -- --profile cluster\` (after \`stack:down\`) runs these tests.\n`);
}
const until = waitsUpTo(60_000, 250);

(onCluster ? describe : describe.skip)('native stack: the cluster profile', () => {
  // Every broker: the kill test below takes one down, and a client must still find the others.
  const kafka = new Kafka({ clientId: randomName('cluster-test'), brokers: [...CLUSTER_BROKERS], logLevel: logLevel.NOTHING, retry: { retries: 8 } });
  let admin: Admin;

  beforeAll(async () => {
    admin = kafka.admin();
    await admin.connect();
  });

  afterAll(async () => {
    await admin?.disconnect();
  });

  const partition0 = async (topic: string) => {
    const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
    return (topics[0] as ITopicMetadata).partitions.find((p) => p.partitionId === 0);
  };

  it('lists the three brokers in metadata, each on its own port', async () => {
    const cluster = await admin.describeCluster();
    expect(cluster.brokers.map((b) => `${b.host}:${b.port}`).sort()).toEqual([...CLUSTER_BROKERS].sort());
    expect(cluster.brokers.map((b) => b.nodeId).sort()).toEqual(CLUSTER.kafkaNodes.map((n) => n.nodeId));
  });

  it('gives a new topic three in-sync replicas by default and requires two of them for acks=all', async () => {
    const topic = randomName('cluster-rf');
    try {
      // No replication factor given: the brokers' default.replication.factor decides.
      await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });
      const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
      for (const p of topics[0]?.partitions ?? []) {
        expect(p.replicas).toHaveLength(3);
        expect(p.isr).toHaveLength(3);
      }
      const described = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: 2, name: topic, configNames: ['min.insync.replicas', 'unclean.leader.election.enable'] }] });
      const entries = Object.fromEntries((described.resources[0]?.configEntries ?? []).map((e) => [e.configName, e.configValue]));
      expect(entries).toEqual({ 'min.insync.replicas': '2', 'unclean.leader.election.enable': 'false' });
    } finally {
      await admin.deleteTopics({ topics: [topic] }).catch(() => {});
    }
  });

  it('runs both Connect workers in one group on the shared storage topics, replicated three times', async () => {
    // Each member's metadata carries its worker's REST URL, but only in a stable group: during a rebalance
    // (a connector another test created or deleted a moment ago) the members come without metadata.
    const group = await until(
      'the Connect group stable with both workers',
      async () => {
        const described = (await admin.describeGroups([KAFKA.connectGroupId])).groups[0];
        const urls = (described?.members ?? []).map((m) => /http:\/\/[\d.]+:\d+\//.exec(m.memberMetadata.toString('latin1'))?.[0]).sort();
        return { state: described?.state, protocolType: described?.protocolType, urls };
      },
      (g) => g.state === 'Stable' && g.urls.length === 2 && g.urls.every((u) => u !== undefined),
    );
    expect(group.protocolType).toBe('connect');
    expect(group.urls).toEqual(CLUSTER.connectWorkers.map((w) => `http://127.0.0.1:${w.port}/`));
    for (const topic of [KAFKA.connectConfigTopic, KAFKA.connectOffsetTopic, KAFKA.connectStatusTopic]) {
      expect((await partition0(topic))?.replicas).toHaveLength(3);
    }
  });

  it('keeps acks=all writes working while one broker is killed, and `stack up` restarts that broker only', async () => {
    const topic = randomName('cluster-kill');
    const victim = CLUSTER.kafkaNodes[1];
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, allowAutoTopicCreation: false });
    const consumer = kafka.consumer({ groupId: randomName('cluster-kill-group'), maxWaitTimeInMs: 100 });
    try {
      // The victim leads the partition, so the kill forces a leader election too.
      await admin.createTopics({ topics: [{ topic, replicaAssignment: [{ partition: 0, replicas: [victim.nodeId, 1, 3] }] }], waitForLeaders: true });
      expect((await partition0(topic))?.leader).toBe(victim.nodeId);
      await producer.connect();
      await producer.send({ topic, acks: -1, messages: [{ key: 'k', value: 'before' }] });

      const others = (await stack.status()).filter((s) => s.name !== victim.name).map((s) => [s.name, s.pid]);
      expect(await stack.stopService(victim.name, { kill: true })).toBe('killed');
      // Until the controller fences the dead broker (broker.session.timeout.ms), sends may fail and retry.
      const sent = await until('an acks=all send with one broker dead', () =>
        producer.send({ topic, acks: -1, messages: [{ key: 'k', value: 'during' }] }).then(() => true, () => false));
      expect(sent).toBe(true);
      const during = await partition0(topic);
      expect(during?.leader).not.toBe(victim.nodeId);
      expect(during?.isr).toHaveLength(2);

      const { startedAny } = await stack.up();
      expect(startedAny).toBe(true);
      const after = await stack.status();
      expect(after.filter((s) => s.name !== victim.name).map((s) => [s.name, s.pid])).toEqual(others);
      expect(after.find((s) => s.name === victim.name)).toMatchObject({ running: true, ready: true });
      await until('the restarted broker back in the ISR', () => partition0(topic), (p) => p?.isr.length === 3);

      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      const values: string[] = [];
      void consumer.run({ eachMessage: async ({ message }) => void values.push(String(message.value)) });
      await until('both records consumed', () => values.length >= 2);
      // A send retried after a timeout may have been written twice (no idempotent producer here): none lost is the point.
      expect([...new Set(values)]).toEqual(['before', 'during']);
    } finally {
      await consumer.disconnect().catch(() => {});
      await producer.disconnect().catch(() => {});
      await admin.deleteTopics({ topics: [topic] }).catch(() => {});
    }
  }, 120_000);
});
