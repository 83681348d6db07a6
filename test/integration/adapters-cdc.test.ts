import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { AVRO_CONTENT_TYPE, createCodec, JSON_CONTENT_TYPE, topicForReplacement, type Codec } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { deleteConnector, deployConnector } from '../../src/connector';
import { createPool } from '../../src/db';
import { createOutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import type { EventMap } from '../../examples/outbox-events';
import { ADAPTER_CASES, ORDERS_TABLE_DDL, type AdapterSession, type OrderEvent } from '../../scripts/bench/adapter-cases';
import { collect } from '../support/consume';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(180_000);

/**
 * Through every ORM and driver adapter, on the real stack: the events each writes in its library's
 * transaction reach the topic through Debezium and the Event Router with their payload bytes intact,
 * Avro (through the registry) and JSON alike, and the events of a rolled-back transaction never do.
 */
describe('adapters end to end through Debezium', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let codec: Codec;
  let topic: string;
  const sessions: AdapterSession[] = [];

  beforeAll(async () => {
    db = await freshDatabase('adapters_cdc');
    const prefix = randomName('t').replace(/-/g, '');
    const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
    config = testConfig(db.name, { connector: { topicReplacement, topicPrefix: prefix } });
    topic = topicForReplacement(topicReplacement)('order');
    await provision(config);
    pool = createPool(config.database, { max: 2 });
    await pool.query(ORDERS_TABLE_DDL);
    codec = createCodec({ registry: config.registry, autoRegister: true, topicFor: topicForReplacement(topicReplacement) });
    expect((await deployConnector(config)).action).toBe('created');
  });

  afterAll(async () => {
    for (const session of sessions) await session.close();
    await deleteConnector(config, { dropSlot: true, force: true }).catch(() => {});
    await pool?.end();
    await db?.drop();
  });

  it('each adapter\'s committed events arrive byte for byte, Avro and JSON; its rolled-back ones never', async () => {
    const writer = createOutboxWriter<EventMap>({ outbox: config.outbox, codec });
    const committed: Array<{ adapter: string; id: string; payload: OrderEvent['payload'] }> = [];
    for (const adapter of ADAPTER_CASES) {
      const session = await adapter.open(db.config, writer);
      sessions.push(session);
      const orderId = randomUUID();
      const events: OrderEvent[] = ([AVRO_CONTENT_TYPE, JSON_CONTENT_TYPE] as const).map((contentType) => ({
        aggregateType: 'order',
        aggregateId: orderId,
        type: 'OrderCancelled',
        contentType,
        payload: { orderId, reason: `${adapter.name} ${contentType} ünïcode`, cancelledAt: new Date(1_700_000_000_123) },
      }));
      // First a rolled-back transaction on the same key: had it been published, it would come first.
      const failed = await session.writeInTransaction(randomUUID(), events.map((e) => ({ ...e, aggregateId: orderId })), { fail: true }).catch(() => undefined);
      expect(failed).toBeUndefined();
      const written = await session.writeInTransaction(orderId, events);
      written.forEach((w, i) => committed.push({ adapter: adapter.name, id: w.id, payload: (events[i] as OrderEvent).payload }));
    }

    const records = await collect([topic], (rs) => committed.every((c) => rs.some((r) => r.headers.id === c.id)));
    // Nothing but the committed events: the rolled-back transactions published nothing.
    expect(records.map((r) => r.headers.id).sort()).toEqual(committed.map((c) => c.id).sort());
    const { rows } = await pool.query<{ id: string; payload: Buffer }>('SELECT id::text, payload FROM outbox');
    const stored = new Map(rows.map((r) => [r.id, r.payload]));
    for (const c of committed) {
      const record = records.find((r) => r.headers.id === c.id);
      expect([c.adapter, record?.value.equals(stored.get(c.id) as Buffer)]).toEqual([c.adapter, true]);
      const decoded = await codec.decode(record?.value as Buffer, record?.headers.contentType as string);
      // JSON carries the date as its ISO string; Avro as timestamp-millis (a Date).
      expect([c.adapter, JSON.parse(JSON.stringify(decoded))]).toEqual([c.adapter, JSON.parse(JSON.stringify(c.payload))]);
    }
    expect(new Set(records.map((r) => r.headers.contentType))).toEqual(new Set([AVRO_CONTENT_TYPE, JSON_CONTENT_TYPE]));
  });
});
