import { randomUUID } from 'node:crypto';
import { integer, pgTable, text } from 'drizzle-orm/pg-core';
import type { Pool } from 'pg';
import { drizzleOn } from '../../src/adapters/drizzle';
import { knexOn } from '../../src/adapters/knex';
import { kyselyOn } from '../../src/adapters/kysely';
import type { OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { provision } from '../../src/provision';
import type { HandlerContext, Handlers, RoutedEvent } from '../../src/router';
import { createHandlerHarness, type HandlerHarness } from '../../src/testing';
import { rejection } from '../support/expect-error';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(60_000);

interface Payment {
  orderId: string;
  cents: number;
  /** Makes the handler throw after its write: the write must roll back with the inbox row. */
  fail?: boolean;
}

const payments = pgTable('payments', { orderId: text('order_id').primaryKey(), cents: integer('cents').notNull() });

/** One handler per library, each writing the payment with that library's own builder on a handle bound to ctx.tx. */
const HANDLER_CASES: Array<{ name: string; handle(event: RoutedEvent<Payment>, ctx: HandlerContext): Promise<void> }> = [
  {
    name: 'Kysely',
    async handle(event, ctx) {
      await kyselyOn<{ payments: { order_id: string; cents: number } }>(ctx.tx).insertInto('payments').values({ order_id: event.payload.orderId, cents: event.payload.cents }).execute();
    },
  },
  {
    name: 'Drizzle',
    async handle(event, ctx) {
      await drizzleOn(ctx.tx).insert(payments).values({ orderId: event.payload.orderId, cents: event.payload.cents });
    },
  },
  {
    name: 'Knex',
    async handle(event, ctx) {
      await knexOn(ctx.tx)('payments').insert({ order_id: event.payload.orderId, cents: event.payload.cents });
    },
  },
];

/**
 * Handlers written in the user's ORM (docs/adapters.md, "Handlers"): a handle bound to the router's
 * inbox transaction (ctx.tx), run through the router's real inbox code (outbox-router/testing).
 */
describe.each(HANDLER_CASES)('a $name handler in the inbox transaction', ({ name, handle }) => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let harness: HandlerHarness;
  const paid = async (orderId: string) => (await pool.query<{ cents: number }>('SELECT cents FROM payments WHERE order_id = $1', [orderId])).rows.map((r) => r.cents);
  const payment = (payload: Payment, id = randomUUID()) => ({ id, aggregateType: 'order', aggregateId: payload.orderId, type: 'OrderPaid', payload });

  beforeAll(async () => {
    db = await freshDatabase('adapters_handlers');
    config = testConfig(db.name);
    await provision(config);
    pool = createPool(config.database, { max: 3 });
    await pool.query('CREATE TABLE payments (order_id text PRIMARY KEY, cents int NOT NULL)');
    const handlers: Handlers = {
      order: {
        OrderPaid: async (event: RoutedEvent<Payment>, ctx) => {
          await handle(event, ctx);
          if (event.payload.fail) throw new Error(`${name} handler failed after its write`);
        },
      },
    };
    harness = createHandlerHarness({ pool, handlers, consumer: `payments-${name.toLowerCase()}` });
  });

  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  it('its write commits with the inbox row; a redelivery is skipped', async () => {
    const orderId = randomUUID();
    const event = payment({ orderId, cents: 1250 });
    expect(await harness.deliver(event)).toEqual({ id: event.id, result: 'applied' });
    expect(await paid(orderId)).toEqual([1250]);
    expect(await harness.applied([event.id])).toEqual([event.id]);
    // Redelivered: had the handler run again, its INSERT would fail on the primary key.
    expect(await harness.deliver(event)).toEqual({ id: event.id, result: 'duplicate' });
    expect(await paid(orderId)).toEqual([1250]);
  });

  it('a handler that throws after its write rolls back both its write and the inbox row, so the retry applies it', async () => {
    const orderId = randomUUID();
    const id = randomUUID();
    await expect(harness.deliver(payment({ orderId, cents: 99, fail: true }, id))).rejects.toThrow(`${name} handler failed after its write`);
    expect(await paid(orderId)).toEqual([]);
    expect(await harness.applied([id])).toEqual([]);
    expect((await harness.deliver(payment({ orderId, cents: 99 }, id))).result).toBe('applied');
    expect(await paid(orderId)).toEqual([99]);
  });

  it('several events in one inbox transaction all commit, or none does', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await expect(harness.deliverAll([payment({ orderId: a, cents: 1 }), payment({ orderId: b, cents: 2, fail: true })])).rejects.toThrow('failed after its write');
    expect([await paid(a), await paid(b)]).toEqual([[], []]);
    const results = await harness.deliverAll([payment({ orderId: a, cents: 1 }), payment({ orderId: b, cents: 2 })]);
    expect(results.map((r) => r.result)).toEqual(['applied', 'applied']);
    expect([await paid(a), await paid(b)]).toEqual([[1], [2]]);
  });
});

describe('createHandlerHarness', () => {
  it('refuses a handlers object that is not a handlers map, and an event without a handler', async () => {
    const pool = createPool(testConfig('postgres').database, { max: 1 });
    try {
      expect(() => createHandlerHarness({ pool, handlers: { order: { OrderPaid: 'nope' } } as never })).toThrow(/order\.OrderPaid: a string, neither a function nor \{ batch: function \}/);
      const harness = createHandlerHarness({ pool, handlers: { order: { OrderPaid: async () => {} } } });
      const error = await rejection(harness.deliver({ aggregateType: 'order', aggregateId: 'o', type: 'OrderShipped', payload: {} }));
      expect([error.code, error.message]).toEqual(['HANDLER_NOT_FOUND', expect.stringContaining('handled here: OrderPaid')]);
    } finally {
      await pool.end();
    }
  });
});
