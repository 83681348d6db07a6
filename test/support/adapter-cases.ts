/**
 * One case per ORM or driver adapter (src/adapters), for the writer's integration tests: each opens its
 * library on a database, writes a business row and events in the library's own transaction idiom, and
 * hands out a handle that is NOT inside a transaction (which the adapter must refuse).
 * Every case writes the business row with the library's own query builder or model.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js';
import { integer, pgTable, text, type PgDatabase, type PgQueryResultHKT } from 'drizzle-orm/pg-core';
import knex from 'knex';
import { Kysely, PostgresDialect } from 'kysely';
import { Pool, type ClientConfig } from 'pg';
import postgres from 'postgres';
import { DataTypes, Sequelize } from 'sequelize';
import { DataSource, EntitySchema } from 'typeorm';
import { createDrizzleWriter } from '../../src/adapters/drizzle';
import { createKnexWriter } from '../../src/adapters/knex';
import { createKyselyWriter } from '../../src/adapters/kysely';
import { createPostgresJsWriter } from '../../src/adapters/postgres-js';
import { createSequelizeWriter } from '../../src/adapters/sequelize';
import { createTypeormWriter } from '../../src/adapters/typeorm';
import type { OutboxEventOf, OutboxWriter, WrittenEvent } from '../../src/producer';
import type { EventMap } from '../../examples/outbox-events';

export type OrderEvent = OutboxEventOf<EventMap>;

/** The business table every case writes: `CREATE TABLE orders (id text PRIMARY KEY, total int NOT NULL)`. */
export const ORDERS_TABLE_DDL = 'CREATE TABLE orders (id text PRIMARY KEY, total int NOT NULL)';

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
/** The installed version (read from disk: some packages' exports maps hide their package.json). */
const version = (name: string) => (JSON.parse(readFileSync(join(__dirname, '../../node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;

interface KyselyDb {
  orders: { id: string; total: number };
}

const ordersTable = pgTable('orders', { id: text('id').primaryKey(), total: integer('total').notNull() });

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
            await trx.insertInto('orders').values({ id, total: 1 }).execute();
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
            await trx('orders').insert({ id, total: 1 });
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
            await tx`INSERT INTO orders ${tx({ id, total: 1 })}`;
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
      const Order = new EntitySchema<{ id: string; total: number }>({ name: 'orders', columns: { id: { type: 'text', primary: true }, total: { type: 'int' } } });
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
      const Order = sequelize.define('orders', { id: { type: DataTypes.TEXT, primaryKey: true }, total: { type: DataTypes.INTEGER, allowNull: false } }, { timestamps: false, tableName: 'orders' });
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
];
