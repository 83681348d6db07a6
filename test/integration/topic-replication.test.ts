/**
 * The replication rule (src/topics/replication.ts) against the real Kafka cluster: on one broker (the
 * single-node stack) connector:deploy's topic check asks for nothing more; on 3 or more brokers (the
 * stack's cluster profile) it refuses under-replicated topics without --force (TOPIC_REPLICATION_UNSAFE),
 * and the relay creates its topics with 3 replicas and min.insync.replicas 2. Which half runs is decided
 * by the cluster's broker count (describeCluster, read before the tests are defined); the other half is
 * skipped and says why.
 */
import { spawnSync } from 'node:child_process';
import { ConfigResourceTypes } from 'kafkajs';
import type { OutboxConfig } from '../../src/config';
import { createConnectClient, deployConnector } from '../../src/connector';
import { topicFindings } from '../../src/connector/topic-guard';
import { provision } from '../../src/provision';
import { createRelay } from '../../src/relay';
import { createLogger } from '../../src/log';
import { teardownConnectorTest } from '../support/connector-teardown';
import { rejection } from '../support/expect-error';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomIdentifier, stackUrls, testKafka, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

jest.setTimeout(120_000);

/** The broker count, read synchronously (jest defines tests synchronously); 0 when Kafka does not answer. */
function brokerCount(): number {
  const script = `const { Kafka, logLevel } = require('kafkajs');
const admin = new Kafka({ clientId: 'probe', brokers: ${JSON.stringify(stackUrls.kafkaBrokers)}, logLevel: logLevel.NOTHING, retry: { retries: 2 } }).admin();
admin.connect().then(() => admin.describeCluster()).then((c) => { process.stdout.write(String(c.brokers.length)); return admin.disconnect(); }).catch(() => process.stdout.write('0'));`;
  const probe = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 });
  return Number(probe.stdout.trim()) || 0;
}

const brokers = brokerCount();
const cluster = brokers >= 3;
process.stderr.write(
  cluster
    ? `\ntopic-replication.test.ts: ${brokers} brokers: the single-broker tests are SKIPPED\n\n`
    : `\ntopic-replication.test.ts: ${brokers} broker(s): the cluster tests (3+ brokers, the stack's cluster profile) are SKIPPED\n\n`,
);

const id = randomIdentifier('rf');
const topicPart = `t${id}`;
let db: FreshDatabase;
let config: OutboxConfig;

beforeAll(async () => {
  db = await freshDatabase('rf');
  config = testConfig(db.name, {
    connect: { url: process.env.OUTBOX_CONNECT_URL || stackUrls.connect },
    connector: { topicPrefix: id, topicReplacement: `${topicPart}.outbox.event.\${routedByValue}`, heartbeatIntervalMs: 1_000 },
  });
  await provision(config);
});

afterAll(async () => {
  await teardownConnectorTest([config], db, topicPart);
});

(cluster ? describe.skip : describe)('one broker (the single-node stack)', () => {
  it("connector:deploy's topic check refuses nothing and reads no replication facts; the one-copy warning stays", async () => {
    const check = await topicFindings(config, undefined, { replicationFactor: -1 });
    expect(check.warning).toBeUndefined();
    expect(check.replication).toEqual([]);
    expect(check.durability).toMatch(/^EVENTS WOULD LIVE ON ONE COPY/);
    // The default config (replication factor 1) passes every guard: a dry run writes nothing and refuses nothing.
    const result = await deployConnector(config, { dryRun: true });
    expect(result.action).toBe('dry-run');
    expect(result.config['topic.creation.default.replication.factor']).toBe('-1');
  });
});

(cluster ? describe : describe.skip)('3 or more brokers (the cluster profile)', () => {
  const admin = testKafka().admin();
  beforeAll(() => admin.connect());
  afterAll(() => admin.disconnect());

  it("judges the default (-1: the brokers' default.replication.factor and min.insync.replicas) by the brokers, and refuses --replication-factor 1", async () => {
    const { brokers: nodes } = await admin.describeCluster();
    const { resources } = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.BROKER, name: String(nodes[0]?.nodeId), configNames: ['default.replication.factor', 'min.insync.replicas'] }],
    });
    const value = (name: string) => Number(resources[0]?.configEntries.find((e) => e.configName === name)?.configValue);
    const durableDefaults = value('default.replication.factor') >= 3 && value('min.insync.replicas') >= 2;
    const dry = deployConnector(config, { dryRun: true });
    if (durableDefaults) expect((await dry).config['topic.creation.default.replication.factor']).toBe('-1');
    else expect((await rejection(dry)).code).toBe('TOPIC_REPLICATION_UNSAFE');

    const error = await rejection(deployConnector(config, { dryRun: true, build: { topicReplicationFactor: 1 } }));
    expect(error.code).toBe('TOPIC_REPLICATION_UNSAFE');
    expect(error.message).toContain('--replication-factor 3');
  });

  it('refuses an under-replicated existing topic without --force, naming topic, value and fix; deploys nothing', async () => {
    const weak = `${topicPart}.outbox.event.weak`;
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic: weak, numPartitions: 1, replicationFactor: 1, configEntries: [{ name: 'min.insync.replicas', value: '1' }] }] });
    const error = await rejection(deployConnector(config, { dryRun: true }));
    expect(error.code).toBe('TOPIC_REPLICATION_UNSAFE');
    expect(error.message).toContain(`${weak} has replication factor 1`);
    expect(error.message).toContain(`${weak} has min.insync.replicas=1`);
    expect(error.message).toContain('--force');
    expect(await createConnectClient(config.connect).getConfig(config.connector.name)).toBeUndefined();

    const forced = await deployConnector(config, { dryRun: true, force: true });
    expect(forced.overridden.some((o) => o.includes(weak))).toBe(true);
    await admin.deleteTopics({ topics: [weak] });
  });

  it('accepts replication factor 3 with min.insync.replicas 2', async () => {
    const check = await topicFindings(config, undefined, { replicationFactor: 3, minInsyncReplicas: 2 });
    expect(check.replication).toEqual([]);
  });

  it('the relay creates its topics with 3 replicas and min.insync.replicas 2', async () => {
    const aggregateType = randomIdentifier('agg');
    const topic = `${topicPart}.outbox.event.${aggregateType}`;
    const pgClient = new (await import('pg')).Client(db.config);
    await pgClient.connect();
    await pgClient.query(
      "INSERT INTO public.outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type) VALUES (gen_random_uuid(), $1, 'a1', 'Created', convert_to('{}', 'UTF8'), 'application/json')",
      [aggregateType],
    );
    await pgClient.end();
    const relay = createRelay({ config, logger: createLogger({ level: 'silent', format: 'json' }), settings: { workers: 1, pollIntervalMs: 50 } });
    await relay.start();
    try {
      await waitsUpTo(60_000, 250)(`relay created ${topic}`, async () => (await admin.listTopics()).includes(topic));
    } finally {
      await relay.stop();
    }
    const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
    expect(topics[0]?.partitions.every((p) => p.replicas.length === 3)).toBe(true);
    const { resources } = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['min.insync.replicas'] }] });
    expect(resources[0]?.configEntries.find((e) => e.configName === 'min.insync.replicas')?.configValue).toBe('2');
  });
});
