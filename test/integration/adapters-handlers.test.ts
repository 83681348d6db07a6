import { randomUUID } from 'node:crypto';
import { integer, pgTable, text } from 'drizzle-orm/pg-core';
import type { ClientConfig, Pool } from 'pg';
import pgPromise from 'pg-promise';
import { DataTypes, Sequelize } from 'sequelize';
import { DataSource, EntitySchema } from 'typeorm';
import { loadPrismaClient } from '../../scripts/bench/prisma-client';
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

type PaymentHandler = (event: RoutedEvent<Payment>, ctx: HandlerContext) => Promise<void>;

const payments = pgTable('payments', { orderId: text('order_id').primaryKey(), cents: integer('cents').notNull() });
const url = (c: ClientConfig) => `postgres://${c.user}:${encodeURIComponent(String(c.password))}@${c.host}:${c.port}/${c.database}`;

/**
 * One handler per library, each writing the payment with that library's own builder: on a handle bound
 * to ctx.tx (Kysely, Drizzle, Knex), or as SQL the library builds and ctx.tx runs, for the libraries
 * that cannot run on a connection they did not open (docs/adapters.md, "Handlers in other libraries").
 * `open` is the library's setup in the user's application, once, on its own database connection.
 */
const HANDLER_CASES: Array<{ name: string; open(config: ClientConfig): Promise<{ handle: PaymentHandler; close?(): Promise<void> }> }> = [
  {
    name: 'Kysely',
    open: async () => ({
      handle: async (event, ctx) => {
        await kyselyOn<{ payments: { order_id: string; cents: number } }>(ctx.tx).insertInto('payments').values({ order_id: event.payload.orderId, cents: event.payload.cents }).execute();
      },
    }),
  },
  {
    name: 'Drizzle',
    open: async () => ({
      handle: async (event, ctx) => {
        await drizzleOn(ctx.tx).insert(payments).values({ orderId: event.payload.orderId, cents: event.payload.cents });
      },
    }),
  },
  {
    name: 'Knex',
    open: async () => ({
      handle: async (event, ctx) => {
        await knexOn(ctx.tx)('payments').insert({ order_id: event.payload.orderId, cents: event.payload.cents });
      },
    }),
  },
  {
    name: 'TypeORM',
    async open(config) {
      const Payment = new EntitySchema<{ order_id: string; cents: number }>({ name: 'payments', columns: { order_id: { type: 'text', primary: true }, cents: { type: 'int' } } });
      const source = new DataSource({ type: 'postgres', ...(config as object), username: config.user, entities: [Payment], poolSize: 1 } as never);
      await source.initialize();
      return {
        handle: async (event, ctx) => {
          const [sql, params] = source.createQueryBuilder().insert().into(Payment).values({ order_id: event.payload.orderId, cents: event.payload.cents }).getQueryAndParameters();
          await ctx.tx.query(sql, params);
        },
        close: () => source.destroy(),
      };
    },
  },
  {
    name: 'Sequelize',
    async open(config) {
      const sequelize = new Sequelize(url(config), { logging: false, pool: { max: 1 } });
      const Payment = sequelize.define('payments', { order_id: { type: DataTypes.TEXT, primaryKey: true }, cents: { type: DataTypes.INTEGER, allowNull: false } }, { timestamps: false, tableName: 'payments' });
      // The query generator of Sequelize's query interface: typed `unknown` in Sequelize 6, hence the cast.
      const generator = sequelize.getQueryInterface().queryGenerator as { insertQuery(table: string, values: object, attributes: object): { query: string; bind?: unknown[] } };
      return {
        handle: async (event, ctx) => {
          const { query, bind } = generator.insertQuery(Payment.getTableName() as string, { order_id: event.payload.orderId, cents: event.payload.cents }, Payment.getAttributes());
          await ctx.tx.query(query, bind);
        },
        close: () => sequelize.close(),
      };
    },
  },
  {
    name: 'Prisma',
    async open() {
      const { Prisma } = loadPrismaClient();
      return {
        handle: async (event, ctx) => {
          const statement = Prisma.sql`INSERT INTO payments (order_id, cents) VALUES (${event.payload.orderId}, ${event.payload.cents})`;
          await ctx.tx.query(statement.text, statement.values);
        },
      };
    },
  },
  {
    name: 'pg-promise',
    async open() {
      // pg-promise's formatting only, with no database object: pgp.helpers builds the statement.
      const pgp = pgPromise();
      return {
        handle: async (event, ctx) => {
          await ctx.tx.query(pgp.helpers.insert({ order_id: event.payload.orderId, cents: event.payload.cents }, null, 'payments'));
        },
      };
    },
  },
];

/**
 * Handlers written in the user's ORM (docs/adapters.md, "Handlers"): a handle bound to the router's
 * inbox transaction (ctx.tx), run through the router's real inbox code (outbox-router/testing).
 */
describe.each(HANDLER_CASES)('a $name handler in the inbox transaction', ({ name, open }) => {
  let db: FreshDatabase;
  let close: (() => Promise<void>) | undefined;
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
    const library = await open(db.config);
    const handle = library.handle;
    close = library.close;
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
    await close?.();
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
