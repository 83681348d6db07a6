import { randomUUID } from 'node:crypto';
import { PrismaPg } from '@prisma/adapter-pg';
import type { Pool } from 'pg';
import { createCodec, JSON_CONTENT_TYPE } from '../../src/codec';
import { createPool } from '../../src/db';
import { createPrismaWriter } from '../../src/adapters/prisma';
import { createOutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import type { EventMap } from '../../examples/outbox-events';
import { ORDERS_TABLE_DDL, type OrderEvent } from '../../scripts/bench/adapter-cases';
import { loadPrismaClient, type PrismaShopClient, type PrismaShopTransaction } from '../../scripts/bench/prisma-client';
import { rejection } from '../support/expect-error';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(60_000);

/**
 * What the Prisma adapter's transaction check (docs/adapters.md, "Prisma") must get right beyond the
 * shared adapter tests (adapters-writer.test.ts): an extended client's transaction client, and nested
 * transactions, whose clients have `$transaction` like the root client.
 */
describe('Prisma adapter: extended clients and nested transactions', () => {
  let db: FreshDatabase;
  let pool: Pool;
  let prisma: PrismaShopClient;
  let extended: PrismaShopClient;
  let outbox: ReturnType<typeof createPrismaWriter<OrderEvent>>;
  const event = (orderId: string): OrderEvent => ({ aggregateType: 'order', aggregateId: orderId, type: 'OrderCancelled', payload: { orderId, reason: 'nested', cancelledAt: new Date() } });
  const outboxRows = async (orderId: string) => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE aggregate_id = $1', [orderId])).rows[0]?.n;
  const orders = async (orderId: string) => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM shop_orders WHERE id = $1', [orderId])).rows[0]?.n;

  beforeAll(async () => {
    db = await freshDatabase('adapters_prisma');
    const config = testConfig(db.name);
    await provision(config);
    pool = createPool(config.database, { max: 2 });
    await pool.query(ORDERS_TABLE_DDL);
    const { PrismaClient } = loadPrismaClient();
    prisma = new PrismaClient({ adapter: new PrismaPg({ ...db.config, max: 2 }) });
    extended = (prisma as unknown as { $extends(extension: object): PrismaShopClient }).$extends({ client: { $tenant: () => 'shop' } });
    outbox = createPrismaWriter(createOutboxWriter<EventMap>({ outbox: config.outbox, codec: createCodec({ registry: config.registry }), contentType: JSON_CONTENT_TYPE }));
  });

  afterAll(async () => {
    await prisma?.$disconnect();
    await pool?.end();
    await db?.drop();
  });

  it('writes in an extended client\'s transaction, and refuses the extended client itself', async () => {
    const orderId = randomUUID();
    await extended.$transaction(async (tx) => {
      await tx.shopOrder.create({ data: { id: orderId, total: 1 } });
      await outbox.writeEvent(tx, event(orderId));
    });
    expect([await orders(orderId), await outboxRows(orderId)]).toEqual([1, 1]);
    const other = randomUUID();
    expect((await rejection(outbox.writeEvent(extended, event(other)))).code).toBe('NOT_IN_TRANSACTION');
    expect(await outboxRows(other)).toBe(0);
  });

  it('writes in a nested transaction: a rolled-back inner one drops its event, the outer one commits', async () => {
    const [kept, dropped] = [randomUUID(), randomUUID()];
    await prisma.$transaction(async (tx) => {
      await tx.shopOrder.create({ data: { id: kept, total: 1 } });
      await tx.$transaction(async (inner) => outbox.writeEvent(inner, event(kept)));
      await tx.$transaction(async (inner) => {
        await outbox.writeEvent(inner, event(dropped));
        throw new Error('inner rolls back to its savepoint');
      }).catch(() => undefined);
      // The outer client is still in its transaction after the inner ones ended.
      await outbox.writeEvent(tx, event(kept));
    });
    expect([await orders(kept), await outboxRows(kept), await outboxRows(dropped)]).toEqual([1, 2, 0]);
  });

  it('refuses an inner transaction client kept after its callback, while the outer one is still open', async () => {
    const orderId = randomUUID();
    const error = await prisma.$transaction(async (tx) => {
      let inner: PrismaShopTransaction | undefined;
      await tx.$transaction(async (i) => {
        inner = i;
      });
      return rejection(outbox.writeEvent(inner as PrismaShopTransaction, event(orderId)));
    });
    expect([error.code, error.message]).toEqual(['NOT_IN_TRANSACTION', expect.stringMatching(/Prisma transaction that has already ended/)]);
    expect(await outboxRows(orderId)).toBe(0);
  });
});
