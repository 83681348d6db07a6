import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { createCodec, topicForReplacement, type Codec } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { createConnectClient, deleteConnector, deployConnector } from '../../src/connector';
import { createPool } from '../../src/db';
import { createOrder, ORDERS_DDL } from '../../examples/create-order';
import { createOutboxWriter, type OutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import { collect, type Received } from '../support/consume';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(180_000);

/**
 * The write side end to end, on the real stack: the application's transaction → outbox row → WAL →
 * Debezium + Event Router → Kafka → decoded through the registry.
 */
describe('write side and CDC, end to end', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let codec: Codec;
  let writer: OutboxWriter;
  let topic: string;

  beforeAll(async () => {
    db = await freshDatabase('e2e');
    const prefix = randomName('t').replace(/-/g, '');
    const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
    config = testConfig(db.name, { connector: { topicReplacement, topicPrefix: prefix } });
    topic = topicForReplacement(topicReplacement)('order');
    await provision(config);
    pool = createPool(config.database, { max: 12 });
    await pool.query(ORDERS_DDL);
    codec = createCodec({ registry: config.registry, autoRegister: true, topicFor: topicForReplacement(topicReplacement) });
    writer = createOutboxWriter({ outbox: config.outbox, codec });
    const deployed = await deployConnector(config);
    expect(deployed.action).toBe('created');
  });

  afterAll(async () => {
    await deleteConnector(config, { dropSlot: true, force: true }).catch(() => {});
    await pool?.end();
    await db?.drop();
  });

  it('a committed CreateOrder yields exactly one record; a rolled-back one yields nothing', async () => {
    // The rolled-back and the committed order share one id, so one key and one partition: had the
    // rolled-back event been published, it would arrive before the committed one.
    const orderId = randomUUID();
    const rolledBack = await createOrder(pool, writer, { id: orderId, customerId: 'c-rollback', currency: 'EUR', lines: [{ sku: 'A', quantity: 1, priceCents: 100 }] }, { failBeforeCommit: true }).catch(
      (e: Error) => e,
    );
    expect(rolledBack).toBeInstanceOf(Error);
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const committed = await createOrder(pool, writer, { id: orderId, customerId: 'c-1', currency: 'EUR', traceparent, lines: [{ sku: 'SKU-1', quantity: 2, priceCents: 1250 }] });

    const records = await collect([topic], (rs) => rs.some((r) => r.headers.id === committed.event.id));
    const forOrder = records.filter((r) => r.key === orderId);
    expect(forOrder).toHaveLength(1);
    const record = forOrder[0] as Received;
    expect(record.headers).toMatchObject({ id: committed.event.id, eventType: 'OrderCreated', contentType: 'application/vnd.apache.avro+binary', traceparent });
    // Exactly the contract's headers: no __debezium.context.* (extended.headers.enabled=false).
    expect(Object.keys(record.headers).sort()).toEqual(['contentType', 'eventType', 'headers', 'id', 'traceparent']);
    expect(await codec.decode(record.value, record.headers.contentType as string)).toEqual({
      orderId: committed.orderId,
      customerId: 'c-1',
      currency: 'EUR',
      totalCents: 2500,
      lines: [{ sku: 'SKU-1', quantity: 2, priceCents: 1250 }],
      placedAt: expect.any(Date),
    });
    // Only the committed order is on the topic: nothing of the rolled-back one, no duplicates.
    expect(records.map((r) => r.headers.id)).toEqual([committed.event.id]);
    const orders = await pool.query('SELECT customer_id FROM orders WHERE id = $1', [orderId]);
    expect(orders.rows.map((r) => r.customer_id)).toEqual(['c-1']);
  });

  it('a large logical decoding message in the database neither reaches Kafka nor stops the connector', async () => {
    // Any tool may call pg_logical_emit_message; Debezium publishes such messages unless excluded, and a
    // message over the producer's max.request.size (sized from maxPayloadBytes) fails the task.
    await pool.query("SELECT pg_logical_emit_message(true, 'some-tool', repeat('x', $1::int))", [config.outbox.maxPayloadBytes * 2 + 2 ** 20]);
    const after = await createOrder(pool, writer, { customerId: 'c-after-message', currency: 'EUR', lines: [{ sku: 'M', quantity: 1, priceCents: 1 }] });
    const records = await collect([topic], (rs) => rs.some((r) => r.headers.id === after.event.id));
    expect(records.filter((r) => r.headers.id === after.event.id)).toHaveLength(1);
    const status = await createConnectClient(config.connect).status(config.connector.name);
    expect([status?.connector.state, ...(status?.tasks ?? []).map((t) => t.state)]).toEqual(['RUNNING', 'RUNNING']);
  });

  it('one statement carrying the order and its event (prepareInsert) is published; a failing one publishes nothing', async () => {
    const orderId = randomName('one-stmt');
    const event = { aggregateType: 'order', aggregateId: orderId, type: 'OrderCancelled', payload: { orderId, reason: 'one statement', cancelledAt: new Date() } };
    // The failing statement first, on the same key (same partition) as the one that succeeds after it.
    const failing = await writer.prepareInsert([event], { firstParam: 2 });
    // The business half violates a constraint (NULL customer_id): the outbox half goes down with it.
    await expect(
      pool.query(`WITH o AS (INSERT INTO orders (id, customer_id, currency, total_cents, status) VALUES (gen_random_uuid(), $1, 'EUR', 0, 'x')) ${failing.text}`, [null, ...failing.values]),
    ).rejects.toMatchObject({ code: '23502' });
    const ok = await writer.prepareInsert([event], { firstParam: 2 });
    // No BEGIN: a single statement is atomic by itself.
    await pool.query(`WITH o AS (INSERT INTO orders (id, customer_id, currency, total_cents, status) VALUES (gen_random_uuid(), $1, 'EUR', 0, 'cancelled')) ${ok.text}`, [orderId, ...ok.values]);

    const records = await collect([topic], (rs) => rs.some((r) => r.headers.id === ok.events[0]?.id));
    const mine = records.filter((r) => r.key === orderId);
    expect(mine.map((r) => r.headers.id)).toEqual([ok.events[0]?.id]);
    expect(mine[0]?.headers.id).toBe(ok.events[0]?.id);
    expect(await codec.decode(mine[0]?.value as Buffer, 'application/vnd.apache.avro+binary')).toMatchObject({ orderId, reason: 'one statement' });
  });

  it('1,000 events over 50 aggregates from concurrent writers arrive complete and in order per aggregate', async () => {
    const aggregates = Array.from({ length: 50 }, (_, i) => `${randomName('agg')}-${i}`);
    const perAggregate = 20;
    const writers = 10;
    // Each writer owns 5 aggregates and writes their events in sequence, one transaction each;
    // the 10 writers run concurrently, so commits of different aggregates interleave.
    await Promise.all(
      Array.from({ length: writers }, async (_, w) => {
        const mine = aggregates.filter((_, i) => i % writers === w);
        const client = await pool.connect();
        try {
          for (let seq = 0; seq < perAggregate; seq++) {
            for (const aggregateId of mine) {
              await client.query('BEGIN');
              await writer.writeEvent(client, {
                aggregateType: 'order',
                aggregateId,
                type: 'OrderCancelled',
                payload: { orderId: aggregateId, reason: `seq-${seq}`, cancelledAt: new Date() },
              });
              await client.query('COMMIT');
            }
          }
        } finally {
          client.release();
        }
      }),
    );
    const wanted = new Set(aggregates);
    const records = await collect([topic], (rs) => rs.filter((r) => wanted.has(r.key)).length >= aggregates.length * perAggregate, 120_000);
    const mine = records.filter((r) => wanted.has(r.key));
    const byKey = new Map<string, number[]>();
    for (const r of mine) {
      const payload = (await codec.decode(r.value, r.headers.contentType as string)) as { reason: string };
      byKey.set(r.key, [...(byKey.get(r.key) ?? []), Number(payload.reason.slice(4))]);
    }
    expect(byKey.size).toBe(50);
    for (const [, seqs] of byKey) expect(seqs).toEqual(Array.from({ length: perAggregate }, (_, i) => i));
    expect(new Set(mine.map((r) => r.headers.id)).size).toBe(1000);
  });
});
