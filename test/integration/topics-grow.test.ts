/**
 * `growTopics` (`outbox topics:grow`): adding partitions to a routed topic under load keeps per-key order,
 * because the connector is stopped and the router's group has applied everything before the topic grows
 * (KAFKA-20030: otherwise a key's next events may be applied from a new partition before its earlier
 * ones are read from the old one). A group that cannot be confirmed refuses the growth. The first
 * version paused the connector: its producer kept the old partition count (metadata.max.age.ms) and
 * moved keys minutes later, unguarded; the check that keys reach the new partitions caught it.
 */
import type { Admin } from 'kafkajs';
import type { Pool } from 'pg';
import { createCodec, JSON_CONTENT_TYPE, topicForReplacement } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { createConnectClient, deleteConnector, deployConnector, growTopics } from '../../src/connector';
import { createPool } from '../../src/db';
import { isOutboxError } from '../../src/errors';
import { createLogger } from '../../src/log';
import { createOutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import { createRouter, type Router } from '../../src/router';
import { collectStatus } from '../../src/status';
import { readRecordedPartitions } from '../../src/topics/partition-record';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, testKafka, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

jest.setTimeout(300_000);

describe('growing a routed topic without breaking per-key order', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let admin: Admin;
  let router: Router | undefined;
  let topic: string;
  let groupId: string;
  const until = waitsUpTo(180_000, 250);

  beforeAll(async () => {
    db = await freshDatabase('grow');
    const prefix = randomName('g').replace(/-/g, '');
    config = testConfig(db.name, { connector: { topicReplacement: `${prefix}.outbox.event.\${routedByValue}`, topicPrefix: prefix } });
    topic = `${prefix}.outbox.event.order`;
    groupId = `c-${prefix}`;
    await provision(config);
    pool = createPool(config.database, { max: 6 });
    await pool.query('CREATE TABLE applied (seq bigserial PRIMARY KEY, key text NOT NULL, n int NOT NULL)');
    admin = testKafka().admin();
    await admin.connect();
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 2 }] });
    await deployConnector(config);
    router = createRouter({
      config,
      consumer: groupId,
      groupId,
      topics: new RegExp(`^${topic.replace(/\./g, '\\.')}$`),
      topicRefreshMs: 1_000,
      logger: createLogger({ level: 'silent' }),
      handlers: {
        order: {
          OrderNoted: async (event, { tx }) => {
            await tx.query('INSERT INTO applied (key, n) VALUES ($1, $2)', [event.aggregateId, (event.payload as { n: number }).n]);
          },
        },
      },
    });
    await router.start();
  });

  afterAll(async () => {
    await router?.stop();
    await deleteConnector(config, { dropSlot: true, force: true }).catch(() => {});
    await admin?.disconnect();
    await pool?.end();
    await db?.drop();
  });

  it('grows 2 → 6 partitions while writers run: every key\'s events are applied once each, in order, and keys move to the new partitions', async () => {
    const writer = createOutboxWriter({ outbox: config.outbox, codec: createCodec({ registry: config.registry, topicFor: topicForReplacement(config.connector.topicReplacement) }), contentType: JSON_CONTENT_TYPE });
    const keys = Array.from({ length: 24 }, (_, i) => `key-${i}`);
    const perKey = 45;
    const writeRound = async (n: number) => {
      for (const key of keys) {
        const client = await pool.connect();
        try {
          await client.query('BEGIN');
          await writer.writeEvent(client, { aggregateType: 'order', aggregateId: key, type: 'OrderNoted', payload: { n } });
          await client.query('COMMIT');
        } finally {
          client.release();
        }
      }
    };
    // A third before the growth, a third while it runs (held in the WAL while the connector is stopped), a third after.
    // connector:deploy recorded the topic as it found it (migration 014).
    expect(await readRecordedPartitions(pool, config.outbox)).toEqual([expect.objectContaining({ topic, partitions: 2, recordedBy: 'connector:deploy' })]);
    for (let n = 0; n < 15; n++) await writeRound(n);
    await until('the first third applied', async () => router?.stats().applied ?? 0, (a) => a >= keys.length * 15);
    const growing = growTopics(config, { topics: [topic], partitions: 6, groups: [groupId], producer: 'connector', settleMs: 2_000, timeoutMs: 120_000 });
    for (let n = 15; n < 30; n++) await writeRound(n);
    const report = await growing;
    expect(report.topics).toEqual([expect.objectContaining({ topic, from: 2, to: 6 })]);
    expect(report.recorded).toBe(true);
    expect(await readRecordedPartitions(pool, config.outbox)).toEqual([expect.objectContaining({ topic, partitions: 6, recordedBy: 'topics:grow' })]);
    for (let n = 30; n < perKey; n++) await writeRound(n);
    await until('everything applied', async () => router?.stats().applied ?? 0, (a) => a >= keys.length * perKey);
    const rows = (await pool.query<{ key: string; n: number }>('SELECT key, n FROM applied ORDER BY seq')).rows;
    expect(rows).toHaveLength(keys.length * perKey);
    for (const key of keys) expect(rows.filter((r) => r.key === key).map((r) => r.n)).toEqual(Array.from({ length: perKey }, (_, i) => i));
    const offsets = await admin.fetchTopicOffsets(topic);
    expect(offsets).toHaveLength(6);
    expect(offsets.filter((p) => p.partition >= 2 && Number(p.high) > 0).length).toBeGreaterThan(0);
    const status = await createConnectClient(config.connect).status(config.connector.name);
    expect(status?.connector.state).toBe('RUNNING');
  });

  it('refuses while a named group has not applied everything, resuming the connector and leaving the topic as it was', async () => {
    const error = await growTopics(config, { topics: [topic], partitions: 8, groups: [groupId, `never-${groupId}`], producer: 'connector', settleMs: 500, timeoutMs: 3_000 }).catch((e: unknown) => e);
    expect(isOutboxError(error) && error.code).toBe('TOPIC_GROWTH_REFUSED');
    expect((error as Error).message).toContain(`never-${groupId}`);
    expect(await admin.fetchTopicOffsets(topic)).toHaveLength(6);
    await until('the connector running again', async () => (await createConnectClient(config.connect).status(config.connector.name))?.connector.state, (s) => s === 'RUNNING');
  });

  it('outbox status warns about partitions added outside topics:grow, and the next deploy says so and records them', async () => {
    const partitionsSection = async () => {
      const status = await collectStatus(config, { groups: [groupId] });
      if (!status.topicPartitions.ok) throw new Error(status.topicPartitions.error);
      return { section: status.topicPartitions, reasons: status.verdict.reasons.map((r) => r.message) };
    };
    const before = await partitionsSection();
    expect(before.section.changes).toEqual([]);
    expect(before.section.topics).toEqual([{ topic, partitions: 6, recorded: 6 }]);
    expect(before.reasons.filter((r) => r.includes(topic))).toEqual([]);

    await admin.createPartitions({ topicPartitions: [{ topic, count: 7 }] });
    const after = await partitionsSection();
    expect(after.section.changes).toEqual([expect.objectContaining({ topic, partitions: 7, expected: 6, source: 'topics:grow' })]);
    expect(after.reasons).toContainEqual(expect.stringContaining(`topic ${topic} has 7 partitions, not 6 when topics:grow recorded it`));

    const deployed = await deployConnector(config);
    expect(deployed.warnings).toContainEqual(expect.stringContaining(`topic ${topic} has 7 partitions, not 6 when topics:grow recorded it`));
    expect(deployed.warnings).toContainEqual(expect.stringContaining('This deploy records the new count'));
    expect((await partitionsSection()).section.changes).toEqual([]);
    expect(await readRecordedPartitions(pool, config.outbox)).toEqual([expect.objectContaining({ topic, partitions: 7, recordedBy: 'connector:deploy' })]);
  });
});
