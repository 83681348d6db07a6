/**
 * A replication slot lost to max_slot_wal_keep_size, end to end on a real server: the connector is
 * stopped with events it has not read, WAL grows past the limit, the watchdog warns before the loss
 * (SlotInvalidationImminent, then SlotWalUnreserved) and reports it (SlotInvalidated), connector:deploy refuses to resume from
 * the lost slot and names the recovery, and the recovery (--resnapshot) brings every committed event
 * to the topic.
 *
 * It lowers max_slot_wal_keep_size for the whole cluster, so it runs only in the version-matrix
 * projects (jest.config.js), each on a private cluster with 1 MB WAL segments.
 */
import type { Pool } from 'pg';
import { createCodec, topicForReplacement } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { createConnectClient, deleteConnector, deployConnector } from '../../src/connector';
import { createPool } from '../../src/db';
import { createOutboxWriter, type OutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import { createWatchdog, dedupKey, type Watchdog } from '../../src/watchdog';
import { collect } from '../support/consume';
import { rejection } from '../support/expect-error';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, withClient, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';
import { startReceiver } from '../support/webhook-receiver';

jest.setTimeout(300_000);

const MiB = 1024 * 1024;
const KEEP = '16MB';
const until = waitsUpTo(120_000);

describe('slot invalidation, end to end (max_slot_wal_keep_size)', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let writer: OutboxWriter;
  let topic: string;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let watchdog: Watchdog | undefined;

  const slotState = async () =>
    (
      await withClient('postgres', (c) =>
        c.query<{ active: boolean; wal_status: string | null; safe_wal_size: string | null }>('SELECT active, wal_status, safe_wal_size::text FROM pg_replication_slots WHERE slot_name = $1', [
          config.connector.slotName,
        ]),
      )
    ).rows[0];
  const alerts = (rule: string) =>
    receiver.received.filter((r) => r.body.dedupKey === dedupKey('matrix', config.connector.slotName, rule as never)).map((r) => `${String(r.body.event)}:${String(r.body.severity)}`);

  /** Commits `n` events, one transaction each, on aggregates of their own; returns their ids. */
  const write = async (n: number, batch: string): Promise<string[]> => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const written = await writer.writeEvent(client, { aggregateType: 'order', aggregateId: `${batch}-${i}`, type: 'OrderCreated', payload: { batch, i }, contentType: 'application/json' });
        await client.query('COMMIT');
        ids.push(written.id);
      } finally {
        client.release();
      }
    }
    return ids;
  };

  beforeAll(async () => {
    db = await freshDatabase('inval');
    const prefix = randomName('t').replace(/-/g, '');
    const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
    config = testConfig(db.name, { connector: { topicReplacement, topicPrefix: prefix } });
    topic = topicForReplacement(topicReplacement)('order');
    await provision(config);
    pool = createPool(config.database, { max: 4 });
    writer = createOutboxWriter({ outbox: config.outbox, codec: createCodec({ registry: config.registry, topicFor: topicForReplacement(topicReplacement) }) });
    receiver = await startReceiver();
    expect((await deployConnector(config)).action).toBe('created');
  });

  afterAll(async () => {
    await watchdog?.stop(0);
    await withClient('postgres', async (c) => {
      await c.query('ALTER SYSTEM RESET max_slot_wal_keep_size');
      await c.query('SELECT pg_reload_conf()');
    });
    await deleteConnector(config, { dropSlot: true, force: true }).catch(() => {});
    await pool?.end();
    await receiver?.close();
    await db?.drop();
  });

  it('warns before the slot is lost (imminent, then unreserved), reports the loss, refuses to resume on it, and --resnapshot brings every committed event through', async () => {
    const read = await write(20, 'read');
    await collect([topic], (rs) => read.every((id) => rs.some((r) => r.headers.id === id)), 90_000);

    // The connector stops with events it has not read: nothing streams them while the WAL grows.
    const connect = createConnectClient(config.connect);
    await connect.stop(config.connector.name);
    await until('the slot is released', slotState, (s) => s?.active === false);
    const unread = await write(20, 'unread');

    await withClient('postgres', async (c) => {
      await c.query(`ALTER SYSTEM SET max_slot_wal_keep_size = '${KEEP}'`);
      await c.query('SELECT pg_reload_conf()');
    });
    await until('safe_wal_size is reported', slotState, (s) => s?.safe_wal_size !== null && s?.safe_wal_size !== undefined);

    watchdog = createWatchdog({
      config: {
        ...config,
        watchdog: {
          ...config.watchdog,
          intervalMs: 250,
          cluster: 'matrix',
          slots: [config.connector.slotName],
          webhookUrl: receiver.url,
          rateWindowMs: 4_000,
          clearForMs: 500,
          rules: { ...config.watchdog.rules, invalidationEtaMs: { warning: 3_600_000, critical: 600_000 }, invalidationForMs: 0 },
        },
      },
    });
    watchdog.start();

    // WAL from a database the slot does not decode, about 1 MB every 250 ms: the slot's retention grows
    // toward max_slot_wal_keep_size, and the projection sees it coming before it is lost.
    const emit = () => withClient('postgres', (c) => c.query("SELECT pg_logical_emit_message(false, 'invalidation-test', repeat('x', $1::int))", [MiB]));
    await until('SlotInvalidationImminent fires', async () => {
      await emit();
      return alerts('SlotInvalidationImminent');
    }, (a) => a.some((e) => e.startsWith('firing:')));
    expect(alerts('SlotInvalidated')).toEqual([]);
    expect((await slotState())?.wal_status).not.toBe('lost');

    // Past the limit, before a checkpoint: the WAL is still there, but no longer reserved for the slot.
    await until('wal_status unreserved', async () => {
      await emit();
      return slotState();
    }, (s) => s?.wal_status === 'unreserved');
    await until('SlotWalUnreserved fires', async () => alerts('SlotWalUnreserved'), (a) => a.includes('firing:critical'));
    expect(alerts('SlotInvalidated')).toEqual([]);

    // The next checkpoint removes the WAL the slot still needs.
    await until('the slot is lost', async () => {
      await emit();
      await withClient('postgres', (c) => c.query('CHECKPOINT'));
      return slotState();
    }, (s) => s?.wal_status === 'lost');
    await until('SlotInvalidated fires', async () => alerts('SlotInvalidated'), (a) => a.includes('firing:critical'));
    const invalidated = receiver.received.find((r) => r.body.dedupKey === dedupKey('matrix', config.connector.slotName, 'SlotInvalidated'));
    expect(String(invalidated?.body.summary)).toContain('connector:deploy --resnapshot');
    await watchdog.stop(0);
    watchdog = undefined;

    // A plain deploy refuses to resume on the lost slot, and says how to recover.
    const refused = await rejection(deployConnector(config));
    expect(refused.code).toBe('CONNECTOR_UNSAFE');
    expect(refused.details).toMatchObject({ findings: expect.arrayContaining(['slot-lost']) });
    expect(refused.message).toContain('--resnapshot');
    expect(refused.message).toContain('outbox relay');

    // The recovery: a new slot and a snapshot of the outbox table, then streaming from that slot.
    const recovered = await deployConnector(config, { resnapshot: true });
    expect(recovered.action).toBe('created');
    expect(recovered.config['snapshot.mode']).toBe('initial');
    const after = await write(20, 'after');

    const committed = [...read, ...unread, ...after];
    const records = await collect([topic], (rs) => committed.every((id) => rs.some((r) => r.headers.id === id)), 120_000);
    const seen = new Set(records.map((r) => r.headers.id));
    expect(committed.filter((id) => !seen.has(id))).toEqual([]);
    // Nothing invented: every record on the topic is a committed event.
    expect(records.filter((r) => !committed.includes(String(r.headers.id)))).toEqual([]);
    // The unread events came through once the slot was recreated (from the snapshot).
    expect(unread.every((id) => seen.has(id))).toBe(true);
    expect(new Set(committed).size).toBe(60);
  });
});
