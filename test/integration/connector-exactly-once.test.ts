/**
 * connector.exactlyOnce (KIP-618) on the real stack. Which half runs depends on the Connect worker the
 * test reaches (OUTBOX_CONNECT_URL, default the local stack's), because exactly.once.source.support is
 * a worker setting read at its start and no test may restart the shared stack:
 *
 * - a worker without it (`stack up`'s default, Kafka's): connector:deploy refuses with
 *   CONNECT_EXACTLY_ONCE_DISABLED and creates nothing; a connector without exactlyOnce writes plain
 *   records, its offsets contiguous;
 * - a worker with it (OUTBOX_STACK_EXACTLY_ONCE=enabled at `stack up`): the connector is stored with
 *   exactly.once.support=required and transaction.boundary=poll, its records are read back with
 *   read_committed, and every partition it wrote ends with a transaction marker (an offset no record
 *   has); a connector without exactlyOnce is transactional too, as the worker decides the producer.
 *
 * The half that does not apply says so on stderr and asserts nothing. CI runs the file twice, once on
 * each kind of worker, and says which it expects (OUTBOX_TEST_CONNECT_EXACTLY_ONCE=enabled|disabled), so
 * a pass that reached the wrong worker fails instead of skipping its half.
 */
import { randomUUID } from 'node:crypto';
import type { OutboxConfig } from '../../src/config';
import { buildConnectorConfig, createConnectClient, deployConnector } from '../../src/connector';
import { qualified } from '../../src/db';
import { isOutboxError } from '../../src/errors';
import { provision } from '../../src/provision';
import { collect, type Received } from '../support/consume';
import { teardownConnectorTest } from '../support/connector-teardown';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomIdentifier, stackUrls, testKafka, withClient, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(180_000);

const id = randomIdentifier('eos');
let db: FreshDatabase;
let eosConfig: OutboxConfig;
let plainConfig: OutboxConfig;
let workerEos: boolean;
const note = (line: string) => process.stderr.write(`[connector-exactly-once] ${line}\n`);
const topicOf = (config: OutboxConfig) => config.connector.topicReplacement.replace('${routedByValue}', 'Order');

/** What the worker's validation answers for this connector with exactly.once.support=required. */
async function workerHasExactlyOnce(config: OutboxConfig): Promise<boolean> {
  const validation = await createConnectClient(config.connect).validate(buildConnectorConfig(config));
  const eos = validation.fields.find((f) => f.field === 'exactly.once.support');
  if (eos) note(`worker says: ${eos.errors.join('; ')}`);
  return eos === undefined;
}

/** `rows` events in one database transaction, spread over aggregates (and so partitions). */
async function writeEvents(config: OutboxConfig, rows: number): Promise<string[]> {
  const ids = Array.from({ length: rows }, () => randomUUID());
  await withClient(db.name, async (c) => {
    await c.query('BEGIN');
    for (const [i, eventId] of ids.entries()) {
      await c.query(
        `INSERT INTO ${qualified(config.outbox.schema, config.outbox.table)} (id, aggregate_type, aggregate_id, event_type, payload, content_type)
         VALUES ($1, 'Order', $2, 'OrderPlaced', $3, 'application/json')`,
        [eventId, `order-${i % 7}`, Buffer.from(JSON.stringify({ i }))],
      );
    }
    await c.query('COMMIT');
  });
  return ids;
}

/** Per partition of the topic: its offset range, and the offsets of the records a read_committed read got. */
async function offsetsOf(topic: string, records: Received[]): Promise<Array<{ partition: number; low: bigint; high: bigint; recordOffsets: bigint[] }>> {
  const admin = testKafka().admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(topic);
    return offsets.map((o) => ({
      partition: o.partition,
      low: BigInt(o.low),
      high: BigInt(o.high),
      recordOffsets: records.filter((r) => r.partition === o.partition).map((r) => BigInt(r.offset)),
    }));
  } finally {
    await admin.disconnect();
  }
}

/** Deploys, writes 3 transactions of 10 events, reads them back (read_committed) and returns the offsets. */
async function roundTrip(config: OutboxConfig): Promise<{ records: Received[]; ids: string[]; partitions: Awaited<ReturnType<typeof offsetsOf>> }> {
  // The other connector's events stay unpublished for this one: the deploy would refuse a new slot over them.
  await withClient(db.name, (c) => c.query(`DELETE FROM ${qualified(config.outbox.schema, config.outbox.table)}`));
  await deployConnector(config);
  const ids = [...(await writeEvents(config, 10)), ...(await writeEvents(config, 10)), ...(await writeEvents(config, 10))];
  // read_committed sees a record only once its transaction's marker is written: the offsets are final here.
  const records = await collect([topicOf(config)], (r) => r.length >= ids.length, 60_000);
  return { records, ids, partitions: await offsetsOf(topicOf(config), records) };
}

beforeAll(async () => {
  db = await freshDatabase('eos');
  const connect = { url: process.env.OUTBOX_CONNECT_URL || stackUrls.connect };
  eosConfig = testConfig(db.name, {
    connect,
    connector: { topicPrefix: `${id}e`, topicReplacement: `t${id}e.outbox.event.\${routedByValue}`, exactlyOnce: true, heartbeatIntervalMs: 0, deployTimeoutMs: 60_000 },
  });
  plainConfig = testConfig(db.name, {
    connect,
    roles: eosConfig.roles,
    connector: { topicPrefix: `${id}p`, topicReplacement: `t${id}p.outbox.event.\${routedByValue}`, heartbeatIntervalMs: 0, deployTimeoutMs: 60_000 },
  });
  await provision(eosConfig);
  workerEos = await workerHasExactlyOnce(eosConfig);
  note(`Connect at ${connect.url}: exactly.once.source.support ${workerEos ? 'enabled' : 'not enabled'}`);
});

afterAll(() => teardownConnectorTest([eosConfig, plainConfig], db, id));

describe('connector.exactlyOnce', () => {
  it('reaches the kind of worker the run expects (OUTBOX_TEST_CONNECT_EXACTLY_ONCE), when it says', () => {
    const expected = process.env.OUTBOX_TEST_CONNECT_EXACTLY_ONCE;
    if (expected === undefined || expected === '') {
      note('OUTBOX_TEST_CONNECT_EXACTLY_ONCE not set: runs the half that applies to this worker');
      return;
    }
    expect(['enabled', 'disabled']).toContain(expected);
    expect(workerEos ? 'enabled' : 'disabled').toBe(expected);
  });

  it('on a worker without exactly-once source support: deploy refuses with CONNECT_EXACTLY_ONCE_DISABLED and creates neither connector nor slot', async () => {
    if (workerEos) return note('worker has exactly-once source support: the refusal cannot happen here (tested where the worker lacks it, and in test/unit/connector/deploy-exactly-once.test.ts)');
    const error = await deployConnector(eosConfig).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isOutboxError(error) && error.code).toBe('CONNECT_EXACTLY_ONCE_DISABLED');
    expect((error as Error).message).toContain('This worker does not have exactly-once source support enabled.');
    expect((error as Error).message).toContain('exactly.once.source.support=enabled');
    expect(await createConnectClient(eosConfig.connect).getConfig(eosConfig.connector.name)).toBeUndefined();
    const slots = await withClient('postgres', async (c) => (await c.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [eosConfig.connector.slotName])).rowCount);
    expect(slots).toBe(0);
  });

  it('on a worker with it: stored as required/poll, every event read once with read_committed, each partition closed by a transaction marker', async () => {
    if (!workerEos) return note('worker lacks exactly-once source support: start the stack with OUTBOX_STACK_EXACTLY_ONCE=enabled (or point OUTBOX_CONNECT_URL at such a worker) to run this half');
    const { records, ids, partitions } = await roundTrip(eosConfig);
    const stored = await createConnectClient(eosConfig.connect).getConfig(eosConfig.connector.name);
    expect(stored).toMatchObject({ 'exactly.once.support': 'required', 'transaction.boundary': 'poll' });
    expect(records.map((r) => r.headers['id']).sort()).toEqual([...ids].sort());
    const written = partitions.filter((p) => p.recordOffsets.length > 0);
    expect(written.length).toBeGreaterThan(0);
    for (const p of written) {
      // The log holds more entries than records: commit markers, one per transaction and partition.
      expect(Number(p.high - p.low)).toBeGreaterThan(p.recordOffsets.length);
      expect(p.recordOffsets).not.toContain(p.high - 1n);
    }
    note(`exactlyOnce: ${records.length} records, log entries ${partitions.map((p) => `p${p.partition} ${p.high - p.low}/${p.recordOffsets.length} records`).join(', ')}`);
  });

  it('without exactlyOnce, the worker decides: transaction markers if it has exactly-once source support, contiguous records if not', async () => {
    const { records, ids, partitions } = await roundTrip(plainConfig);
    const stored = await createConnectClient(plainConfig.connect).getConfig(plainConfig.connector.name);
    expect(stored).not.toHaveProperty(['exactly.once.support']);
    expect(records.map((r) => r.headers['id']).sort()).toEqual([...ids].sort());
    for (const p of partitions.filter((x) => x.recordOffsets.length > 0)) {
      if (workerEos) expect(p.recordOffsets).not.toContain(p.high - 1n);
      else expect(Number(p.high - p.low)).toBe(p.recordOffsets.length);
    }
    note(`plain on a worker ${workerEos ? 'with' : 'without'} EOS: log entries ${partitions.map((p) => `p${p.partition} ${p.high - p.low}/${p.recordOffsets.length} records`).join(', ')}`);
  });
});
