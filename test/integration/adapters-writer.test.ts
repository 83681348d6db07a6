import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { createCodec, JSON_CONTENT_TYPE } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { createOutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import { ADAPTER_CASES, ORDERS_TABLE_DDL, type AdapterSession, type OrderEvent } from '../../scripts/bench/adapter-cases';
import { rejection } from '../support/expect-error';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(60_000);

/**
 * The writer through each ORM and driver adapter (src/adapters) on the real database: the business row
 * (written with the library's own builder or model) and the event commit together, a rollback writes
 * neither, and a handle outside a transaction is refused before anything is written.
 */
describe.each(ADAPTER_CASES)('writer through $name', (adapter) => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let session: AdapterSession;
  const cancelled = (orderId: string, reason = 'adapter test'): OrderEvent => ({ aggregateType: 'order', aggregateId: orderId, type: 'OrderCancelled', payload: { orderId, reason, cancelledAt: new Date(1_700_000_000_000) } });
  const count = async (table: 'shop_orders' | 'outbox', column: 'id' | 'aggregate_id', value: string) =>
    (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE ${column} = $1`, [value])).rows[0]?.n;

  beforeAll(async () => {
    db = await freshDatabase('adapters');
    config = testConfig(db.name);
    await provision(config);
    pool = createPool(config.database, { max: 2 });
    await pool.query(ORDERS_TABLE_DDL);
    const writer = createOutboxWriter<import('../../examples/outbox-events').EventMap>({ outbox: config.outbox, codec: createCodec({ registry: config.registry }), contentType: JSON_CONTENT_TYPE });
    session = await adapter.open(db.config, writer);
  });

  afterAll(async () => {
    await session?.close();
    await pool?.end();
    await db?.drop();
  });

  it('commits the business row and its events together; the payload bytes are the encoded payload', async () => {
    const orderId = randomUUID();
    const written = await session.writeInTransaction(orderId, [cancelled(orderId, 'first'), cancelled(orderId, 'second')]);
    expect(written.map((w) => w.aggregateId)).toEqual([orderId, orderId]);
    expect(await count('shop_orders', 'id', orderId)).toBe(1);
    const { rows } = await pool.query<{ id: string; payload: Buffer; content_type: string }>('SELECT id::text, payload, content_type FROM outbox WHERE aggregate_id = $1 ORDER BY seq', [orderId]);
    expect(rows.map((r) => r.id)).toEqual(written.map((w) => w.id));
    expect(rows.map((r) => r.content_type)).toEqual([JSON_CONTENT_TYPE, JSON_CONTENT_TYPE]);
    expect(JSON.parse(rows[1]?.payload.toString('utf8') as string)).toEqual({ orderId, reason: 'second', cancelledAt: '2023-11-14T22:13:20.000Z' });
  });

  it('a rollback after the outbox write writes neither the business row nor the event', async () => {
    const orderId = randomUUID();
    await expect(session.writeInTransaction(orderId, [cancelled(orderId)], { fail: true })).rejects.toThrow('business rule failed');
    expect(await count('shop_orders', 'id', orderId)).toBe(0);
    expect(await count('outbox', 'aggregate_id', orderId)).toBe(0);
  });

  it('refuses a handle that is not inside a transaction, naming the library, and writes nothing', async () => {
    const orderId = randomUUID();
    const error = await rejection(session.writeOutside([cancelled(orderId)]));
    expect(error.code).toBe('NOT_IN_TRANSACTION');
    expect(error.message).toContain(adapter.name.split(' ')[0]);
    expect(error.message).toMatch(/not inside a transaction.*nothing was written/);
    expect(await count('outbox', 'aggregate_id', orderId)).toBe(0);
  });

  // Only the libraries whose transaction handle tells that it has ended (docs/adapters.md).
  if (adapter.tellsEnded) {
    it('refuses a transaction that has already committed', async () => {
      const orderId = randomUUID();
      const error = await rejection(session.writeAfterEnd?.([cancelled(orderId)]) ?? Promise.resolve());
      expect(error.code).toBe('NOT_IN_TRANSACTION');
      expect(error.message).toMatch(/already ended/);
      expect(await count('outbox', 'aggregate_id', orderId)).toBe(0);
    });
  }
});
