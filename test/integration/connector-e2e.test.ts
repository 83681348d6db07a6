/**
 * End to end through the deployed connector, on an outbox with hostile schema and table names:
 * a committed row is routed once (key, headers, value bytes as written), a rolled-back row never;
 * the heartbeat upsert keeps the slot confirmed while the outbox is idle.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import type { Consumer, KafkaMessage } from 'kafkajs';
import type { OutboxConfig } from '../../src/config';
import { connectorCommands } from '../../src/cli/connector-commands';
import { deleteConnector, deployConnector } from '../../src/connector';
import { qualified } from '../../src/db';
import { provision } from '../../src/provision';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomIdentifier, randomName, stackUrls, testKafka, withClient, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

jest.setTimeout(120_000);

const id = randomIdentifier('e2e');
const topic = `t${id}.outbox.event.Order`;
let db: FreshDatabase;
let config: OutboxConfig;
let consumer: Consumer | undefined;
const received: Array<{ message: KafkaMessage; at: number }> = [];

const header = (m: KafkaMessage, name: string) => m.headers?.[name]?.toString();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function insert(row: { id: string; aggregateId: string; payload: Buffer; traceparent?: string | null; headers?: string | null }, commit: boolean): Promise<number> {
  return withClient(db.name, async (c) => {
    await c.query('BEGIN');
    await c.query(
      `INSERT INTO ${qualified(config.outbox.schema, config.outbox.table)} (id, aggregate_type, aggregate_id, event_type, payload, content_type, traceparent, headers)
       VALUES ($1, 'Order', $2, 'OrderPlaced', $3, 'application/vnd.apache.avro+binary', $4, $5)`,
      [row.id, row.aggregateId, row.payload, row.traceparent ?? null, row.headers ?? null],
    );
    await c.query(commit ? 'COMMIT' : 'ROLLBACK');
    return Date.now();
  });
}

const waitFor = waitsUpTo(30_000);

const slot = () =>
  withClient(db.name, async (c) => (await c.query('SELECT active, confirmed_flush_lsn::text AS lsn FROM pg_replication_slots WHERE slot_name = $1', [config.connector.slotName])).rows[0]);

beforeAll(async () => {
  db = await freshDatabase('e2e');
  config = testConfig(db.name, {
    outbox: { schema: 'Out"Box', table: 'ev ents.v1', heartbeatTable: 'heart"beat' },
    connect: { url: process.env.OUTBOX_CONNECT_URL || stackUrls.connect },
    connector: { topicPrefix: id, topicReplacement: `t${id}.outbox.event.\${routedByValue}`, heartbeatIntervalMs: 1_000, deployTimeoutMs: 60_000 },
  });
  await provision(config);
  const result = await deployConnector(config);
  process.stderr.write(`[connector-e2e] deploy -> RUNNING in ${result.runningAfterMs} ms\n`);
});

afterAll(async () => {
  await consumer?.disconnect().catch(() => {});
  await deleteConnector(config, { dropSlot: true, force: true, timeoutMs: 30_000 }).catch((e) => process.stderr.write(`cleanup: ${e}\n`));
  await db.drop();
  await withClient('postgres', async (c) => {
    for (const role of [config.roles.cdc, config.roles.app, config.roles.monitor]) await c.query(`DROP ROLE IF EXISTS ${c.escapeIdentifier(role)}`).catch(() => {});
  });
  const admin = testKafka().admin();
  await admin.connect();
  const topics = (await admin.listTopics()).filter((t) => t.includes(id));
  if (topics.length) await admin.deleteTopics({ topics }).catch(() => {});
  await admin.disconnect();
});

describe('outbox rows through Debezium and the Event Router', () => {
  it('routes a committed row exactly once and a rolled-back one never: key, id/eventType/contentType headers, payload bytes', async () => {
    const aggregateId = `order-${randomUUID()}`;
    const rolledBack = { id: randomUUID(), aggregateId, payload: Buffer.from('never published') };
    const committed = {
      id: randomUUID(),
      aggregateId,
      payload: Buffer.from([0x00, 0x00, 0x00, 0x00, 0x2a, 0xff, 0xfe, 0x00, 0x0a, 0x7b]),
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      headers: '{"tenant":"t1"}',
    };
    // Same key, so one partition: the rolled-back row would come first if it were published at all.
    await insert(rolledBack, false);
    await insert(committed, true);

    const admin = testKafka().admin();
    await admin.connect();
    await waitFor('the routed topic', async () => ((await admin.listTopics()).includes(topic) ? true : undefined));
    await admin.disconnect();

    consumer = testKafka().consumer({ groupId: randomName('e2e'), maxWaitTimeInMs: 20, allowAutoTopicCreation: false });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => void received.push({ message, at: Date.now() }) });
    await waitFor('the committed record', () => (received.length > 0 ? true : undefined));
    await sleep(1_500);

    expect(received).toHaveLength(1);
    const { message } = received[0] as { message: KafkaMessage };
    expect(message.key?.toString()).toBe(aggregateId);
    expect(header(message, 'id')).toBe(committed.id);
    expect(header(message, 'eventType')).toBe('OrderPlaced');
    expect(header(message, 'contentType')).toBe('application/vnd.apache.avro+binary');
    expect(header(message, 'traceparent')).toBe(committed.traceparent);
    expect(header(message, 'headers')).toBe(committed.headers);
    expect(Buffer.compare(message.value as Buffer, committed.payload)).toBe(0);
  });

  it('routes rows with NULL traceparent and headers too, commit to record in tens of milliseconds', async () => {
    const latencies: number[] = [];
    for (let i = 0; i < 10; i++) {
      const row = { id: randomUUID(), aggregateId: `order-${i}`, payload: Buffer.from(JSON.stringify({ i })) };
      const before = received.length;
      const committedAt = await insert(row, true);
      const got = await waitFor(`record ${i}`, () => received.slice(before).find((r) => header(r.message, 'id') === row.id));
      latencies.push(got.at - committedAt);
      expect(got.message.value?.toString()).toBe(JSON.stringify({ i }));
      expect(header(got.message, 'traceparent')).toBeUndefined();
    }
    latencies.sort((a, b) => a - b);
    process.stderr.write(`[connector-e2e] commit -> consumed latency ms: min ${latencies[0]}, median ${latencies[5]}, max ${latencies[9]}\n`);
  });

  it('keeps confirming the slot while the outbox is idle: the heartbeat upsert runs as the CDC role', async () => {
    const before = await slot();
    const beatBefore = await withClient(db.name, async (c) => (await c.query(`SELECT beat_at FROM ${qualified(config.outbox.schema, config.outbox.heartbeatTable)}`)).rows[0]?.beat_at as Date);
    await sleep(4_000);
    const after = await slot();
    const beatAfter = await withClient(db.name, async (c) => (await c.query(`SELECT beat_at FROM ${qualified(config.outbox.schema, config.outbox.heartbeatTable)}`)).rows[0]?.beat_at as Date);
    expect(after?.active).toBe(true);
    expect(beatAfter.getTime()).toBeGreaterThan(beatBefore.getTime());
    const lsn = (s: string) => BigInt(`0x${s.split('/')[0]}`) * 2n ** 32n + BigInt(`0x${s.split('/')[1]}`);
    expect(lsn(after?.lsn)).toBeGreaterThan(lsn(before?.lsn));
  });

  it('has a CLI: connector:status --json exits 0 with the RUNNING task and the active slot; an unreachable Connect exits 1 naming the fix', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'outbox-cli-'));
    const run = async (settings: unknown, args: string[]) => {
      const file = join(dir, `${randomName('cfg')}.json`);
      writeFileSync(file, JSON.stringify(settings));
      const out: string[] = [];
      const err: string[] = [];
      const stdout = jest.spyOn(process.stdout, 'write').mockImplementation((chunk) => (out.push(String(chunk)), true));
      const stderr = jest.spyOn(process.stderr, 'write').mockImplementation((chunk) => (err.push(String(chunk)), true));
      try {
        const program = new Command('outbox').exitOverride();
        for (const command of connectorCommands()) program.addCommand(command);
        await program.parseAsync(['node', 'outbox', ...args, '--config', file]);
        return { code: process.exitCode, out: out.join(''), err: err.join('') };
      } finally {
        stdout.mockRestore();
        stderr.mockRestore();
        process.exitCode = undefined;
      }
    };
    const settings = { database: { database: db.name }, outbox: config.outbox, roles: { cdc: config.roles.cdc }, connect: { url: config.connect.url }, connector: config.connector };
    try {
      const ok = await run(settings, ['connector:status', '--json']);
      expect(ok.code).toBe(0);
      const report = JSON.parse(ok.out);
      expect(report).toMatchObject({ connector: config.connector.name, state: 'RUNNING', healthy: true, slot: { active: true } });
      expect(report.tasks).toEqual([expect.objectContaining({ id: 0, state: 'RUNNING' })]);

      // The environment wins over --config, so the unreachable URL goes there.
      const saved = process.env.OUTBOX_CONNECT_URL;
      process.env.OUTBOX_CONNECT_URL = 'http://127.0.0.1:9';
      const down = await run(settings, ['connector:status']).finally(() => {
        if (saved === undefined) delete process.env.OUTBOX_CONNECT_URL;
        else process.env.OUTBOX_CONNECT_URL = saved;
      });
      expect(down.code).toBe(1);
      expect(down.err).toContain('http://127.0.0.1:9');
      expect(down.err).toContain('npm run stack:up');
      expect(down.err).toContain('CONNECT_UNREACHABLE');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
