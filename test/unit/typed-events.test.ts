/**
 * Typed events (docs/library.md): with the EventMap `outbox schemas:types` generates, writeEvent and the
 * handlers map accept only the map's aggregate types, event types and payloads. The compile errors are
 * the test: each `@ts-expect-error` line must fail to type-check (`npm run typecheck` and ts-jest both
 * check this file), or the directive itself is an error. Without a map everything stays untyped.
 */
import type { ClientBase } from 'pg';
import { loadConfig } from '../../src/config';
import { createOutboxWriter, type OutboxWriter, type PayloadEncoder } from '../../src/producer';
import { createRouter, type BatchHandler, type Handlers, type RouterOptions } from '../../src/router';
import type { EventMap, OrderCreated } from '../../examples/outbox-events';
import { createDrizzleWriter } from '../../src/adapters/drizzle';
import { createKnexWriter } from '../../src/adapters/knex';
import { createKyselyWriter } from '../../src/adapters/kysely';
import { createPgPromiseWriter } from '../../src/adapters/pg-promise';
import { createPostgresJsWriter } from '../../src/adapters/postgres-js';
import { createPrismaWriter } from '../../src/adapters/prisma';
import { createSequelizeWriter } from '../../src/adapters/sequelize';
import { createTypeormWriter } from '../../src/adapters/typeorm';

const encoded: unknown[] = [];
const codec: PayloadEncoder = { encode: async (_a, _t, payload) => (encoded.push(payload), Buffer.from('x')) };
const client = { query: async () => ({ rows: [] }), getTransactionStatus: () => 'T' } as unknown as ClientBase;
const outbox = loadConfig({ env: {} }).outbox;
const created: OrderCreated = { orderId: 'o-1', customerId: 'c-1', currency: 'EUR', totalCents: 0, lines: [], placedAt: new Date(0) };

describe('typed writer: createOutboxWriter<EventMap>', () => {
  const typed = createOutboxWriter<EventMap>({ outbox, codec });

  it('takes an event of the map and writes it as before', async () => {
    const written = await typed.writeEvent(client, { aggregateType: 'order', aggregateId: 'o-1', type: 'OrderCreated', payload: created });
    expect(written).toMatchObject({ aggregateType: 'order', type: 'OrderCreated' });
    expect(encoded).toContainEqual(created);
  });

  it('does not compile a misspelled event type or aggregate type, or a payload of another event type', () => {
    // Never called: only its type-checking matters.
    const misuse = async () => {
      // @ts-expect-error the event type is misspelled
      await typed.writeEvent(client, { aggregateType: 'order', aggregateId: 'o-1', type: 'OrderCreatd', payload: created });
      // @ts-expect-error no such aggregate type
      await typed.writeEvent(client, { aggregateType: 'orders', aggregateId: 'o-1', type: 'OrderCreated', payload: created });
      // @ts-expect-error OrderCancelled's payload has reason and cancelledAt, not OrderCreated's fields
      await typed.writeEvent(client, { aggregateType: 'order', aggregateId: 'o-1', type: 'OrderCancelled', payload: created });
      // @ts-expect-error placedAt is a Date (timestamp-millis), not a string
      await typed.writeEvents(client, [{ aggregateType: 'order', aggregateId: 'o-1', type: 'OrderCreated', payload: { ...created, placedAt: '2026-01-01' } }]);
      // @ts-expect-error a field the schema does not have
      await typed.prepareInsert([{ aggregateType: 'order', aggregateId: 'o-1', type: 'OrderCreated', payload: { ...created, channel: 'web' } }]);
    };
    expect(typeof misuse).toBe('function');
  });

  it('leaves the default writer untyped: any aggregate type, event type and payload', async () => {
    const untyped: OutboxWriter = createOutboxWriter({ outbox, codec });
    await untyped.writeEvent(client, { aggregateType: 'anything', aggregateId: 'a-1', type: 'WhateverHappened', payload: { free: 'form' } });
    // A typed writer still goes where a plain OutboxWriter is expected (the examples' createOrder takes one).
    const asPlain: OutboxWriter = typed;
    expect(asPlain).toBe(typed);
  });
});

describe('typed writer through the ORM and driver adapters (src/adapters)', () => {
  const typed = createOutboxWriter<EventMap>({ outbox, codec });

  it('keeps the EventMap: each adapter takes the map\'s events and refuses a misspelled type or a wrong payload', () => {
    const adapters = [createKyselyWriter(typed), createDrizzleWriter(typed), createKnexWriter(typed), createPostgresJsWriter(typed), createTypeormWriter(typed), createSequelizeWriter(typed), createPrismaWriter(typed), createPgPromiseWriter(typed)];
    // Never called: only its type-checking matters.
    const misuse = async (handle: never) => {
      const [kysely, drizzle, knex, postgresJs, typeorm, sequelize, prisma, pgPromise] = adapters;
      await kysely?.writeEvent(handle, { aggregateType: 'order', aggregateId: 'o-1', type: 'OrderCreated', payload: created });
      // @ts-expect-error the event type is misspelled
      await kysely?.writeEvent(handle, { aggregateType: 'order', aggregateId: 'o-1', type: 'OrderCreatd', payload: created });
      // @ts-expect-error OrderCancelled's payload has reason and cancelledAt, not OrderCreated's fields
      await drizzle?.writeEvent(handle, { aggregateType: 'order', aggregateId: 'o-1', type: 'OrderCancelled', payload: created });
      // @ts-expect-error no such aggregate type
      await knex?.writeEvents(handle, [{ aggregateType: 'orders', aggregateId: 'o-1', type: 'OrderCreated', payload: created }]);
      // @ts-expect-error placedAt is a Date, not a string
      await postgresJs?.writeEvent(handle, { aggregateType: 'order', aggregateId: 'o-1', type: 'OrderCreated', payload: { ...created, placedAt: '2026-01-01' } });
      // @ts-expect-error a field the schema does not have
      await typeorm?.writeEvent(handle, { aggregateType: 'order', aggregateId: 'o-1', type: 'OrderCreated', payload: { ...created, channel: 'web' } });
      // @ts-expect-error the event type is misspelled
      await sequelize?.writeEvent(handle, { aggregateType: 'order', aggregateId: 'o-1', type: 'OrderCancel', payload: created });
      // @ts-expect-error OrderCancelled's payload has reason and cancelledAt, not OrderCreated's fields
      await prisma?.writeEvents(handle, [{ aggregateType: 'order', aggregateId: 'o-1', type: 'OrderCancelled', payload: created }]);
      // @ts-expect-error no such aggregate type
      await pgPromise?.writeEvent(handle, { aggregateType: 'payment', aggregateId: 'o-1', type: 'OrderCreated', payload: created });
    };
    expect(typeof misuse).toBe('function');
    expect(adapters.map((a) => typeof a.writeEvent)).toEqual(Array(8).fill('function'));
  });
});

describe('typed handlers: Handlers<EventMap> and createRouter<EventMap>', () => {
  it('types event.payload per handler', () => {
    const handlers: Handlers<EventMap> = {
      order: {
        OrderCreated: async (event) => {
          const lines: number = event.payload.lines.length;
          const placed: Date = event.payload.placedAt;
          void [lines, placed];
        },
        // One batch function for several event types takes what they share (docs/library.md, "Batch handlers").
        OrderCancelled: { batch: (async (events) => void events.map((e) => e.payload.orderId)) as BatchHandler<{ orderId: string }> },
      },
    };
    expect(Object.keys(handlers.order ?? {})).toEqual(['OrderCreated', 'OrderCancelled']);
  });

  it('does not compile a handler for a misspelled event type or aggregate type, or a wrong payload field', () => {
    const misspelledType: Handlers<EventMap> = {
      // @ts-expect-error OrderCreatd is not an event type of order
      order: { OrderCreatd: async () => {} },
    };
    const misspelledAggregate: Handlers<EventMap> = {
      // @ts-expect-error orders is not an aggregate type
      orders: { OrderCreated: async () => {} },
    };
    const wrongField: Handlers<EventMap> = {
      order: {
        OrderCancelled: async (event) => {
          // @ts-expect-error OrderCancelled has no totalCents
          void event.payload.totalCents;
        },
      },
    };
    const viaRouter = (config: RouterOptions['config']) =>
      createRouter<EventMap>({
        config,
        // @ts-expect-error the same check through createRouter's options
        handlers: { order: { OrderShipped: async () => {} } },
      });
    expect([misspelledType, misspelledAggregate, wrongField, viaRouter].every(Boolean)).toBe(true);
  });

  it('leaves Handlers untyped by default, and a typed map goes where untyped handlers are expected', () => {
    const untyped: Handlers = { anything: { WhateverHappened: async (event) => void (event.payload as { free: string }).free } };
    const typed: Handlers<EventMap> = { order: { OrderCreated: async () => {} } };
    const options: Pick<RouterOptions, 'handlers'> = { handlers: typed };
    expect([untyped, options.handlers]).toHaveLength(2);
  });
});
