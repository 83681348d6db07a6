/**
 * The deploy and delete guard rails against the real stack: an existing compacted event topic, outbox
 * rows written before the slot existed, a drifted publication (deploy and connector:status), and
 * `connector:delete --drop-slot` on a paused connector with outbox rows behind it. One connector,
 * random names; everything created is removed in afterAll.
 */
import { ConfigResourceTypes } from 'kafkajs';
import type { OutboxConfig } from '../../src/config';
import { connectorStatus, createConnectClient, deleteConnector, deployConnector, pauseConnector, type ConnectClient } from '../../src/connector';
import { waitForState } from '../../src/connector/wait';
import { provision } from '../../src/provision';
import { rejection } from '../support/expect-error';
import { testConfig } from '../support/outbox-config';
import { waitForTopics } from '../support/consume';
import { freshDatabase, randomIdentifier, stackUrls, testKafka, withClient, type FreshDatabase } from '../support/stack-env';
import { until } from '../support/until';

jest.setTimeout(120_000);

const id = randomIdentifier('grd');
const connectUrl = process.env.OUTBOX_CONNECT_URL || stackUrls.connect;
let db: FreshDatabase;
let config: OutboxConfig;
let client: ConnectClient;
const admin = testKafka().admin();

const sql = (text: string, params: unknown[] = []) => withClient(db.name, async (c) => (await c.query(text, params)).rows);
const insertEvents = (n: number) =>
  sql(
    `INSERT INTO public.outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type)
     SELECT gen_random_uuid(), 'order', 'o-' || g, 'OrderCreated', convert_to('{}', 'UTF8'), 'application/json' FROM generate_series(1, $1::int) g`,
    [n],
  );
const slotRow = async () => (await sql('SELECT active FROM pg_replication_slots WHERE slot_name = $1', [config.connector.slotName]))[0];

beforeAll(async () => {
  db = await freshDatabase('grd');
  config = testConfig(db.name, {
    connect: { url: connectUrl },
    connector: { topicPrefix: id, topicReplacement: `t${id}.outbox.event.\${routedByValue}`, heartbeatIntervalMs: 1_000, deployTimeoutMs: 60_000 },
  });
  client = createConnectClient(config.connect);
  await provision(config);
  await admin.connect();
});

afterAll(async () => {
  await deleteConnector(config, { dropSlot: true, force: true, timeoutMs: 30_000 }).catch((e) => process.stderr.write(`cleanup: ${e}\n`));
  await db.drop();
  await withClient('postgres', async (c) => {
    for (const role of [config.roles.cdc, config.roles.app, config.roles.monitor]) await c.query(`DROP ROLE IF EXISTS ${c.escapeIdentifier(role)}`).catch(() => {});
  });
  const topics = (await admin.listTopics()).filter((t) => t.includes(id));
  if (topics.length) await admin.deleteTopics({ topics }).catch(() => {});
  await admin.disconnect();
});

describe('deploy and delete guard rails on the real stack', () => {
  it('refuses to deploy while an event topic of the deployment exists with cleanup.policy=compact', async () => {
    const topic = `t${id}.outbox.event.compacted`;
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] }] });

    const error = await rejection(deployConnector(config));
    expect(error.code).toBe('CONNECTOR_UNSAFE');
    expect(error.details.findings).toEqual(['topic-compacted']);
    expect(error.message).toContain(`Event topic ${topic} has cleanup.policy=compact`);
    expect(await client.list()).not.toContain(config.connector.name);

    await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: 'cleanup.policy', value: 'delete' }] }] });
  });

  it('refuses a first deploy while the outbox holds rows written before the slot, with the count; --force deploys', async () => {
    await insertEvents(5);
    const error = await rejection(deployConnector(config));
    expect(error.code).toBe('CONNECTOR_UNSAFE');
    expect(error.details.findings).toEqual(['rows-before-slot']);
    expect(error.message).toMatch(/^Refusing to deploy connector \S+; nothing was deployed:\n {2}- 5 outbox row\(s\) in "public"\."outbox" are unpublished/);
    expect(error.message).toContain('outbox relay');
    expect(error.message).toContain('snapshot.mode=initial');
    expect(await client.list()).not.toContain(config.connector.name);
    expect(await slotRow()).toBeUndefined();

    const forced = await deployConnector(config, { force: true });
    expect(forced.action).toBe('created');
    expect(forced.overridden.join(' ')).toContain('5 outbox row(s)');
    expect(await slotRow()).toMatchObject({ active: true });
  });

  it('a publication that stopped publishing outbox inserts: deploy refuses, connector:status reports the drift; db:provision repairs it', async () => {
    const pub = `"${config.outbox.publication}"`;
    try {
      await sql(`ALTER PUBLICATION ${pub} SET (publish = 'update')`);
      const error = await rejection(deployConnector(config));
      expect(error.code).toBe('CONNECTOR_PREREQUISITE_MISSING');
      expect(error.message).toContain(`publication ${pub} does not publish inserts`);

      const drifted = await connectorStatus(config);
      expect(drifted.state).toBe('RUNNING');
      expect(drifted.publication).toMatchObject({ ok: false, pubinsert: false, tablePublished: true });
      expect(drifted.healthy).toBe(false);

      await sql(`ALTER PUBLICATION ${pub} SET (publish = 'insert, update')`);
      await sql(`ALTER PUBLICATION ${pub} DROP TABLE public.outbox`);
      const removed = await connectorStatus(config);
      expect(removed.publication).toMatchObject({ ok: false, pubinsert: true, tablePublished: false });
      expect(removed.publication?.problems).toEqual([expect.stringContaining('does not publish the outbox table public.outbox')]);
    } finally {
      await provision(config);
    }
    const repaired = await connectorStatus(config);
    expect(repaired.publication).toMatchObject({ ok: true, problems: [] });
    expect((await deployConnector(config)).action).toBe('unchanged');
  });

  it('delete --drop-slot on a paused connector with outbox rows behind it refuses with the numbers and keeps it paused; --force drops', async () => {
    await pauseConnector(config);
    await waitForState(client, config.connector.name, 'PAUSED', 60_000);
    await insertEvents(3);

    const error = await rejection(deleteConnector(config, { dropSlot: true }));
    expect(error.code).toBe('CONNECTOR_DELETE_UNSAFE');
    expect(error.details.outboxRows).toBe(3);
    expect(error.details.unconfirmedBytes as number).toBeGreaterThan(0);
    expect(error.message).toMatch(/3 committed outbox row\(s\) lie past the connector's position [0-9A-F]+\/[0-9A-F]+: not published yet; slot "\w+" has \d+ bytes of WAL unconfirmed/);
    // Nothing was deleted, and the connector is back where it was.
    await waitForState(client, config.connector.name, 'PAUSED', 60_000);
    expect(await client.getConfig(config.connector.name)).toBeDefined();
    expect(await slotRow()).toBeDefined();

    const forced = await deleteConnector(config, { dropSlot: true, force: true });
    expect(forced).toMatchObject({ deleted: true, offsetsReset: true, slotDropped: true });
    expect(forced.unconfirmed?.outboxRows).toBe(3);
    expect(await slotRow()).toBeUndefined();
  });

  it('delete --drop-slot right after a running connector published every row drops without --force (published, not yet confirmed, is not lost)', async () => {
    await provision(config); // the forced delete above dropped the publication
    await sql('DELETE FROM public.outbox');
    expect((await deployConnector(config)).action).toBe('created');
    await insertEvents(3);
    const topic = `t${id}.outbox.event.order`;
    await waitForTopics([topic]);
    const published = async () => (await admin.fetchTopicOffsets(topic)).reduce((n, p) => n + Number(p.high), 0);
    await until('3 records published', published, (n) => n >= 3, 60_000);
    expect(await published()).toBe(3);

    // At once: the slot may not have confirmed them yet; the stored offset (flushed when the connector stops) has.
    const deleted = await deleteConnector(config, { dropSlot: true });
    expect(deleted).toMatchObject({ deleted: true, slotDropped: true });
    expect(deleted.unconfirmed?.outboxRows).toBe(0);
  });
});
