/**
 * connector:deploy against the real Kafka Connect + Debezium and PostgreSQL: create, no-op redeploy,
 * update, invalid config, guard rails (stale slot; offset without slot), delete with --drop-slot.
 * Random connector, slot, topic and role names; everything created is removed in afterAll.
 */
import type { OutboxConfig, OutboxOptions } from '../../src/config';
import { buildConnectorConfig, createConnectClient, deleteConnector, deployConnector, type ConnectClient } from '../../src/connector';
import { dropSlot, readServerFacts } from '../../src/connector/database';
import { provision } from '../../src/provision';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomIdentifier, stackUrls, testKafka, withClient, type FreshDatabase } from '../support/stack-env';
import { rejection } from '../support/expect-error';
import { until } from '../support/until';

jest.setTimeout(120_000);

const id = randomIdentifier('dep');
const connectUrl = process.env.OUTBOX_CONNECT_URL || stackUrls.connect;
let db: FreshDatabase;
let base: OutboxConfig;
let client: ConnectClient;
const created = new Set<string>();

function configWith(overrides: OutboxOptions = {}): OutboxConfig {
  return testConfig(db.name, {
    ...overrides,
    roles: { cdc: base.roles.cdc, app: base.roles.app, monitor: base.roles.monitor },
    connect: { url: connectUrl },
    connector: {
      name: base.connector.name,
      slotName: base.connector.slotName,
      topicPrefix: id,
      topicReplacement: `t${id}.outbox.event.\${routedByValue}`,
      heartbeatIntervalMs: 1_000,
      deployTimeoutMs: 60_000,
      ...overrides.connector,
    },
  });
}


const slotRow = (slot: string) =>
  withClient(db.name, async (c) => (await c.query('SELECT active, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1', [slot])).rows[0]);

/** A client whose writes are counted, to prove that a no-op deploy writes nothing. */
function countingClient() {
  const real = createConnectClient(base.connect);
  const writes: string[] = [];
  const spy: ConnectClient = {
    ...real,
    putConfig: (name, cfg) => (writes.push(`PUT ${name}`), real.putConfig(name, cfg)),
    create: (name, cfg, state) => (writes.push(`POST ${name}`), real.create(name, cfg, state)),
  };
  return { spy, writes };
}

beforeAll(async () => {
  db = await freshDatabase('conn');
  base = testConfig(db.name, { connect: { url: connectUrl } });
  client = createConnectClient(base.connect);
  await provision(configWith());
});

afterAll(async () => {
  for (const name of created) await client.delete(name).catch(() => {});
  await deleteConnector(configWith(), { dropSlot: true, force: true, timeoutMs: 30_000 }).catch((e) => process.stderr.write(`cleanup: ${e}\n`));
  await db.drop();
  await withClient('postgres', async (c) => {
    for (const role of [base.roles.cdc, base.roles.app, base.roles.monitor]) await c.query(`DROP ROLE IF EXISTS ${c.escapeIdentifier(role)}`).catch(() => {});
  });
  const admin = testKafka().admin();
  await admin.connect();
  const topics = (await admin.listTopics()).filter((t) => t.includes(id));
  if (topics.length) await admin.deleteTopics({ topics }).catch(() => {});
  await admin.disconnect();
});

describe('deployConnector on the real stack', () => {
  it('creates the connector, waits until it and its task are RUNNING, and stores the reference, not the password', async () => {
    const config = configWith();
    const result = await deployConnector(config);
    expect(result.action).toBe('created');
    expect(result.status?.connector.state).toBe('RUNNING');
    expect(result.status?.tasks.map((t) => t.state)).toEqual(['RUNNING']);
    process.stderr.write(`[connector] deploy -> RUNNING in ${result.runningAfterMs} ms (whole deploy ${result.elapsedMs} ms)\n`);

    const stored = await client.getConfig(config.connector.name);
    expect(stored).toEqual(buildConnectorConfig(config));
    expect(stored?.['database.password']).toBe('${env:OUTBOX_CDC_PASSWORD}');
    expect(JSON.stringify(stored)).not.toContain(config.roles.cdcPassword as string);
    expect(await slotRow(config.connector.slotName)).toMatchObject({ active: true });
    // The single-node stack has one broker: the deploy says so, loudly; on the cluster profile (3 brokers, topics at 3 replicas) it does not.
    const admin = testKafka().admin();
    await admin.connect();
    const brokers = (await admin.describeCluster()).brokers.length;
    await admin.disconnect();
    const oneCopy = result.warnings?.find((w) => w.startsWith('EVENTS WOULD LIVE ON ONE COPY'));
    if (brokers === 1) expect(oneCopy).toContain('has 1 broker(s)');
    else expect(oneCopy).toBeUndefined();
  });

  it('writes nothing when redeploying the same config, and says so', async () => {
    const config = configWith();
    const before = await client.getConfig(config.connector.name);
    const { spy, writes } = countingClient();
    const result = await deployConnector(config, { client: spy });
    expect(result.action).toBe('unchanged');
    expect(result.diff.unchanged).toBe(true);
    // A streaming connector's slot never runs ahead of its stored offset: the only warning is the stack's one broker.
    expect(result.warnings?.filter((w) => !w.startsWith('EVENTS WOULD LIVE ON'))).toEqual([]);
    expect(writes).toEqual([]);
    expect(await client.getConfig(config.connector.name)).toEqual(before);
  });

  it('applies a changed pollIntervalMs and waits for tasks that run with it', async () => {
    const config = configWith({ connector: { pollIntervalMs: 50 } });
    const result = await deployConnector(config);
    expect(result.action).toBe('updated');
    expect(result.diff.changed).toEqual([{ key: 'poll.interval.ms', from: String(base.connector.pollIntervalMs), to: '50' }]);
    expect(result.diff.added).toEqual([]);
    expect((await client.getConfig(config.connector.name))?.['poll.interval.ms']).toBe('50');
    expect((await client.tasks(config.connector.name)).map((t) => t.config['poll.interval.ms'])).toEqual(['50']);
    expect((await client.status(config.connector.name))?.tasks.map((t) => t.state)).toEqual(['RUNNING']);
  });

  it('shows a dry run\'s difference without writing it', async () => {
    const result = await deployConnector(configWith({ connector: { pollIntervalMs: 80 } }), { dryRun: true });
    expect(result.action).toBe('dry-run');
    expect(result.diff.changed).toEqual([{ key: 'poll.interval.ms', from: '50', to: '80' }]);
    expect((await client.getConfig(base.connector.name))?.['poll.interval.ms']).toBe('50');
  });

  it('rejects an invalid config with every field error Connect reports, and deploys nothing', async () => {
    const name = randomIdentifier('bad');
    const config = configWith({ database: { database: `${db.name}_missing` }, connector: { name, slotName: randomIdentifier('bad') } });
    const error = await rejection(deployConnector(config));
    expect(error.code).toBe('CONNECTOR_CONFIG_INVALID');
    process.stderr.write(`[connector] invalid config reported as:\n${error.message}\n`);
    const fields = error.details.fields as Array<{ field: string; errors: string[] }>;
    expect(fields.length).toBeGreaterThan(0);
    for (const f of fields) expect(error.message).toContain(`${f.field}: ${f.errors[0]}`);
    expect(error.message).toContain(`${db.name}_missing`);
    expect(await client.list()).not.toContain(name);
  });

  it('refuses a slot that exists without a stored offset, and deploys over it with force', async () => {
    const slot = randomIdentifier('stale');
    const name = randomIdentifier('stale');
    created.add(name);
    await withClient(db.name, (c) => c.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [slot]));
    const config = configWith({ connector: { name, slotName: slot, topicPrefix: `${id}-stale` } });

    const error = await rejection(deployConnector(config));
    expect(error.code).toBe('CONNECTOR_UNSAFE');
    expect(error.details.findings).toEqual(['slot-without-offset']);
    expect(error.message).toContain(`Slot "${slot}" already exists`);
    expect(error.message).toContain('--force');
    expect(await client.list()).not.toContain(name);

    const forced = await deployConnector(config, { force: true });
    expect(forced.action).toBe('created');
    expect(forced.overridden).toHaveLength(1);
    expect((await slotRow(slot))?.active).toBe(true);

    await deleteConnector(config);
    expect(await withClient(db.name, (c) => dropSlot(c, slot, 30_000))).toBe(true);
  });

  it('refuses to recreate a connector whose slot was dropped behind its back (stored offset, no slot: DBZ-5739)', async () => {
    const config = configWith({ connector: { pollIntervalMs: 50 } });
    await until('a stored offset', () => client.offsets(config.connector.name), (offsets) => offsets.length > 0, 30_000);
    expect(await client.offsets(config.connector.name)).not.toHaveLength(0);

    const deleted = await deleteConnector(config);
    expect(deleted).toMatchObject({ deleted: true, offsetsReset: false, slotDropped: false });
    // Connect stops the task asynchronously: dropSlot waits until no walsender holds the slot.
    expect(await withClient(db.name, (c) => dropSlot(c, config.connector.slotName, 30_000))).toBe(true);

    const error = await rejection(deployConnector(config));
    // A server that was promoted (WAL timeline > 1, as on the cluster profile after a failover) names the likely cause.
    const timeline = await withClient(db.name, async (c) => (await readServerFacts(c)).timeline);
    expect(error.code).toBe(timeline !== null && timeline > 1 ? 'SLOT_MISSING_AFTER_FAILOVER' : 'CONNECTOR_UNSAFE');
    expect(error.details.findings).toEqual(['offset-without-slot']);
    expect(error.message).toContain('DBZ-5739');
    expect(error.message).toContain('was removed again');
    expect(await client.list()).not.toContain(config.connector.name);
  });

  it('with force, resets the stale offsets and streams from a new slot', async () => {
    const config = configWith({ connector: { pollIntervalMs: 50 } });
    const forced = await deployConnector(config, { force: true });
    expect(forced.action).toBe('created');
    expect(forced.overridden.join(' ')).toContain('DBZ-5739');
    expect(forced.status?.tasks.map((t) => t.state)).toEqual(['RUNNING']);
    expect(await slotRow(config.connector.slotName)).toMatchObject({ active: true });
  });

  it('deletes with dropSlot: connector, stored offsets, slot and publication are gone', async () => {
    const config = configWith({ connector: { pollIntervalMs: 50 } });

    const result = await deleteConnector(config, { dropSlot: true });
    expect(result).toMatchObject({ deleted: true, offsetsReset: true, slotDropped: true, publicationDropped: true });
    expect(await client.list()).not.toContain(config.connector.name);
    expect(await slotRow(config.connector.slotName)).toBeUndefined();
    const pubs = await withClient(db.name, (c) => c.query('SELECT 1 FROM pg_publication WHERE pubname = $1', [config.outbox.publication]));
    expect(pubs.rowCount).toBe(0);

    // A connector of the same name starts clean: no offsets survived.
    await client.create(config.connector.name, buildConnectorConfig(config), 'STOPPED');
    expect(await client.offsets(config.connector.name)).toEqual([]);
    await client.delete(config.connector.name);

    const again = await rejection(deployConnector(config));
    expect(again.code).toBe('CONNECTOR_PREREQUISITE_MISSING');
    expect(again.message).toContain('db:provision');
  });
});
