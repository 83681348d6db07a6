/**
 * One case per ORM or driver adapter (outbox-router/<library>), for the writer's integration tests and
 * the adapter bench (scripts/bench/adapters.ts): each opens its
 * library on a database, writes a business row and events in the library's own transaction idiom, and
 * hands out a handle that is NOT inside a transaction (which the adapter must refuse).
 * Every case writes the business row with the library's own query builder or model.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { PrismaPg } from '@prisma/adapter-pg';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js';
import { integer, pgTable, text, type PgDatabase, type PgQueryResultHKT } from 'drizzle-orm/pg-core';
import knex from 'knex';
import { Kysely, PostgresDialect } from 'kysely';
import { Pool, type ClientConfig } from 'pg';
import pgPromise from 'pg-promise';
import postgres from 'postgres';
import { DataTypes, Sequelize } from 'sequelize';
import { DataSource, EntitySchema } from 'typeorm';
import { createDrizzleWriter } from 'outbox-router/drizzle';
import { createKnexWriter } from 'outbox-router/knex';
import { createKyselyWriter } from 'outbox-router/kysely';
import { createPgPromiseWriter } from 'outbox-router/pg-promise';
import { createPostgresJsWriter } from 'outbox-router/postgres-js';
import { createPrismaWriter } from 'outbox-router/prisma';
import { createSequelizeWriter } from 'outbox-router/sequelize';
import { createTypeormWriter } from 'outbox-router/typeorm';
import type { OutboxEventOf, OutboxWriter, WrittenEvent } from 'outbox-router/producer';
import type { EventMap } from '../../examples/outbox-events';
import { loadPrismaClient, type PrismaShopTransaction } from './prisma-client';

export type OrderEvent = OutboxEventOf<EventMap>;

/** The business table every case writes: `CREATE TABLE shop_orders (id text PRIMARY KEY, total int NOT NULL)`. */
export const ORDERS_TABLE_DDL = 'CREATE TABLE shop_orders (id text PRIMARY KEY, total int NOT NULL)';

export interface AdapterSession {
  /** In ONE transaction of the library: the business row, then the events; `fail` throws after both, so the library rolls back. */
  writeInTransaction(orderId: string, events: OrderEvent[], options?: { fail?: boolean }): Promise<WrittenEvent[]>;
  /** The events through a handle that is not in a transaction: must be refused. */
  writeOutside(events: OrderEvent[]): Promise<unknown>;
  /** The events through a transaction handle after its transaction committed, where the library can tell. */
  writeAfterEnd?(events: OrderEvent[]): Promise<unknown>;
  close(): Promise<void>;
}

export interface AdapterCase {
  name: string;
  /** The npm package and the installed version it was tested with. */
  library: string;
  /** The library's transaction handle says when it has ended: the session has writeAfterEnd. */
  tellsEnded: boolean;
  open(config: ClientConfig, writer: OutboxWriter<OrderEvent>): Promise<AdapterSession>;
}

const rollback = (fail: boolean | undefined) => {
  if (fail) throw new Error('business rule failed after the outbox write');
};

const url = (c: ClientConfig) => `postgres://${c.user}:${encodeURIComponent(String(c.password))}@${c.host}:${c.port}/${c.database}`;
/** The installed version, from the package.json above its entry point (some exports maps hide package.json). */
function version(name: string): string {
  for (let dir = dirname(require.resolve(name)); dir !== dirname(dir); dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version: string };
    if (pkg.name === name) return pkg.version;
  }
  return 'unknown';
}

interface KyselyDb {
  shop_orders: { id: string; total: number };
}

const ordersTable = pgTable('shop_orders', { id: text('id').primaryKey(), total: integer('total').notNull() });

/** Drizzle on one of its PostgreSQL drivers: the same schema and calls on either. */
function drizzleCase(driver: string, library: string, connect: (config: ClientConfig) => { db: PgDatabase<PgQueryResultHKT>; close(): Promise<void> }): AdapterCase {
  return {
    name: `Drizzle (${driver})`,
    tellsEnded: false,
    library,
    async open(config, writer) {
      const { db, close } = connect(config);
      const outbox = createDrizzleWriter(writer);
      return {
        writeInTransaction: (id, events, { fail } = {}) =>
          db.transaction(async (tx) => {
            await tx.insert(ordersTable).values({ id, total: 1 });
            const written = await outbox.writeEvents(tx, events);
            rollback(fail);
            return written;
          }),
        writeOutside: (events) => outbox.writeEvents(db, events),
        close,
      };
    },
  };
}

export const ADAPTER_CASES: AdapterCase[] = [
  {
    name: 'Kysely',
    tellsEnded: true,
    library: `kysely ${version('kysely')}`,
    async open(config, writer) {
      const db = new Kysely<KyselyDb>({ dialect: new PostgresDialect({ pool: new Pool({ ...config, max: 2 }) }) });
      const outbox = createKyselyWriter(writer);
      return {
        writeInTransaction: (id, events, { fail } = {}) =>
          db.transaction().execute(async (trx) => {
            await trx.insertInto('shop_orders').values({ id, total: 1 }).execute();
            const written = await outbox.writeEvents(trx, events);
            rollback(fail);
            return written;
          }),
        writeOutside: (events) => outbox.writeEvents(db, events),
        async writeAfterEnd(events) {
          const trx = await db.startTransaction().execute();
          await trx.commit().execute();
          return outbox.writeEvents(trx, events);
        },
        close: () => db.destroy(),
      };
    },
  },
  drizzleCase('node-postgres', `drizzle-orm ${version('drizzle-orm')} + pg ${version('pg')}`, (config) => {
    const pool = new Pool({ ...config, max: 2 });
    return { db: drizzlePg({ client: pool }), close: () => pool.end() };
  }),
  drizzleCase('postgres.js', `drizzle-orm ${version('drizzle-orm')} + postgres ${version('postgres')}`, (config) => {
    const client = postgres(url(config), { max: 2, onnotice: () => {} });
    return { db: drizzlePostgresJs({ client }), close: () => client.end() };
  }),
  {
    name: 'Knex',
    tellsEnded: true,
    library: `knex ${version('knex')}`,
    async open(config, writer) {
      const db = knex({ client: 'pg', connection: config as never, pool: { min: 0, max: 2 } });
      const outbox = createKnexWriter(writer);
      return {
        writeInTransaction: (id, events, { fail } = {}) =>
          db.transaction(async (trx) => {
            await trx('shop_orders').insert({ id, total: 1 });
            const written = await outbox.writeEvents(trx, events);
            rollback(fail);
            return written;
          }),
        writeOutside: (events) => outbox.writeEvents(db, events),
        async writeAfterEnd(events) {
          const trx = await db.transaction();
          await trx.commit();
          return outbox.writeEvents(trx, events);
        },
        close: () => db.destroy(),
      };
    },
  },
  {
    name: 'postgres.js',
    tellsEnded: false,
    library: `postgres ${version('postgres')}`,
    async open(config, writer) {
      const sql = postgres(url(config), { max: 2, onnotice: () => {} });
      const outbox = createPostgresJsWriter(writer);
      return {
        writeInTransaction: (id, events, { fail } = {}) =>
          sql.begin(async (tx) => {
            await tx`INSERT INTO shop_orders ${tx({ id, total: 1 })}`;
            const written = await outbox.writeEvents(tx, events);
            rollback(fail);
            return written;
          }) as Promise<WrittenEvent[]>,
        writeOutside: (events) => outbox.writeEvents(sql, events),
        close: () => sql.end(),
      };
    },
  },
  {
    name: 'TypeORM',
    tellsEnded: true,
    library: `typeorm ${version('typeorm')}`,
    async open(config, writer) {
      const Order = new EntitySchema<{ id: string; total: number }>({ name: 'shop_orders', columns: { id: { type: 'text', primary: true }, total: { type: 'int' } } });
      const source = new DataSource({ type: 'postgres', ...(config as object), username: config.user, entities: [Order], poolSize: 2 } as never);
      await source.initialize();
      const outbox = createTypeormWriter(writer);
      return {
        writeInTransaction: (id, events, { fail } = {}) =>
          source.transaction(async (manager) => {
            await manager.getRepository(Order).insert({ id, total: 1 });
            const written = await outbox.writeEvents(manager, events);
            rollback(fail);
            return written;
          }),
        writeOutside: (events) => outbox.writeEvents(source.manager, events),
        async writeAfterEnd(events) {
          const runner = source.createQueryRunner();
          await runner.startTransaction();
          await runner.commitTransaction();
          await runner.release();
          return outbox.writeEvents(runner, events);
        },
        close: () => source.destroy(),
      };
    },
  },
  {
    name: 'Sequelize',
    tellsEnded: true,
    library: `sequelize ${version('sequelize')}`,
    async open(config, writer) {
      const sequelize = new Sequelize(url(config), { logging: false, pool: { max: 2 } });
      const Order = sequelize.define('shop_orders', { id: { type: DataTypes.TEXT, primaryKey: true }, total: { type: DataTypes.INTEGER, allowNull: false } }, { timestamps: false, tableName: 'shop_orders' });
      const outbox = createSequelizeWriter(writer);
      return {
        writeInTransaction: (id, events, { fail } = {}) =>
          sequelize.transaction(async (t) => {
            await Order.create({ id, total: 1 }, { transaction: t });
            const written = await outbox.writeEvents(t, events);
            rollback(fail);
            return written;
          }),
        // What a JavaScript caller might pass instead of a Transaction: the Sequelize instance itself.
        writeOutside: (events) => outbox.writeEvents(sequelize as never, events),
        async writeAfterEnd(events) {
          const t = await sequelize.transaction();
          await t.commit();
          return outbox.writeEvents(t, events);
        },
        close: () => sequelize.close(),
      };
    },
  },
  {
    name: 'Prisma',
    tellsEnded: true,
    library: `@prisma/client ${version('@prisma/client')} + @prisma/adapter-pg ${version('@prisma/adapter-pg')}`,
    async open(config, writer) {
      const { PrismaClient } = loadPrismaClient();
      const prisma = new PrismaClient({ adapter: new PrismaPg({ ...config, max: 2 }) });
      const outbox = createPrismaWriter(writer);
      return {
        writeInTransaction: (id, events, { fail } = {}) =>
          prisma.$transaction(async (tx) => {
            await tx.shopOrder.create({ data: { id, total: 1 } });
            const written = await outbox.writeEvents(tx, events);
            rollback(fail);
            return written;
          }),
        writeOutside: (events) => outbox.writeEvents(prisma, events),
        async writeAfterEnd(events) {
          let kept: PrismaShopTransaction | undefined;
          await prisma.$transaction(async (tx) => {
            kept = tx;
          });
          return outbox.writeEvents(kept as PrismaShopTransaction, events);
        },
        close: () => prisma.$disconnect(),
      };
    },
  },
  {
    name: 'pg-promise',
    tellsEnded: true,
    library: `pg-promise ${version('pg-promise')}`,
    async open(config, writer) {
      const pgp = pgPromise();
      const db = pgp({ ...config, max: 2 } as never);
      const outbox = createPgPromiseWriter(writer);
      return {
        writeInTransaction: (id, events, { fail } = {}) =>
          db.tx(async (t) => {
            await t.none(pgp.helpers.insert({ id, total: 1 }, null, 'shop_orders'));
            const written = await outbox.writeEvents(t, events);
            rollback(fail);
            return written;
          }),
        // A task holds one connection but no transaction: refused like the database object.
        writeOutside: (events) => db.task((t) => outbox.writeEvents(t, events)),
        async writeAfterEnd(events) {
          const kept = await db.tx(async (t) => t);
          return outbox.writeEvents(kept, events);
        },
        close: async () => pgp.end(),
      };
    },
  },
];
