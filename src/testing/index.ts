import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { Codec, ContentType } from '../codec';
import type { EventMapShape } from '../codec/generate-types';
import { qualified } from '../db';
import { OutboxError } from '../errors';
import { handlerCalls } from '../router/apply';
import { applyMany, HandlerFailed, InboxUnavailable, type ApplyResult } from '../router/inbox-transaction';
import { handlerProblems, HANDLERS_SHAPE } from '../router/options';
import type { Ready } from '../router/record-context';
import type { EventTypeHandler, Handlers, RoutedEvent } from '../router/types';

export { unsecuredJwsForTestsOnly, type UnsecuredJwsOptions } from './unsecured-jws';

/**
 * Testing helpers (docs/testing-handlers.md): run your handlers through the router's real inbox
 * transaction (src/router/inbox-transaction.ts, the same code the router runs) against your real
 * database, without Kafka. Deliver an event, the same event twice, or events out of order, then assert
 * what your handler wrote and that a redelivery was skipped.
 */

export interface HandlerHarnessOptions<M extends EventMapShape = EventMapShape> {
  /** A pool on the test database, which has the inbox table (`outbox db:provision`, or provision() in a test setup). */
  pool: Pool;
  /** The same handlers map the router gets. */
  handlers: Handlers<M>;
  /** The inbox's consumer name; default 'test'. Deliveries of two harnesses with one consumer dedupe each other, as two routers of one consumer do. */
  consumer?: string;
  /** Where the inbox is: default `public.inbox` (outbox.schema, outbox.inboxTable). */
  schema?: string;
  inboxTable?: string;
  /** A handler call that takes longer fails, as the router's router.handlerTimeoutMs. Default: no limit. */
  handlerTimeoutMs?: number;
  /**
   * With a codec, each payload is encoded and decoded as on its way through Kafka (JSON: a Date becomes
   * its ISO string; Avro through the registry), so the handler sees what the router would give it.
   * Without one, the handler gets the payload object as given.
   */
  codec?: Pick<Codec, 'encode' | 'decode'>;
  /** The content type of that round trip; default JSON. */
  contentType?: ContentType;
}

/** An event to deliver: what the router builds from a record. `id` (a UUID, the inbox key) is generated when absent. */
export type TestEvent<P = unknown> = Omit<RoutedEvent<P>, 'id' | 'headers'> & { id?: string; headers?: Record<string, string> };

export interface Delivery {
  /** The event's id (the inbox key): deliver an event with it again to redeliver. */
  id: string;
  /** 'applied': the handler ran and its writes committed with the inbox row; 'duplicate': the inbox had the id, nothing ran. */
  result: ApplyResult;
}

export interface HandlerHarness {
  /** One event in its own inbox transaction, as the router applies a record alone. The handler's error rejects it; then nothing was committed. */
  deliver(event: TestEvent): Promise<Delivery>;
  /**
   * Several events in ONE inbox transaction, in the given order, as the router applies a chunk of a
   * partition (consecutive events of one batch handler go in one call). All commit or none does.
   */
  deliverAll(events: readonly TestEvent[]): Promise<Delivery[]>;
  /** The ids this consumer's inbox holds, of the given events (or all): the events it applied. */
  applied(ids?: readonly string[]): Promise<string[]>;
}

export function createHandlerHarness<M extends EventMapShape = EventMapShape>(options: HandlerHarnessOptions<M>): HandlerHarness {
  const problems = handlerProblems(options.handlers);
  if (problems.length > 0) {
    throw new OutboxError('CONFIG_INVALID', `createHandlerHarness's handlers are not a handlers map (${problems.join('; ')}). Give the map the router takes: ${HANDLERS_SHAPE}.`);
  }
  if (typeof options.pool?.connect !== 'function') throw new OutboxError('CONFIG_INVALID', 'createHandlerHarness needs `pool`: a pg Pool on the test database.');
  const handlers = options.handlers as Readonly<Record<string, Readonly<Record<string, EventTypeHandler>>>>;
  const consumer = options.consumer ?? 'test';
  const inboxTable = qualified(options.schema ?? 'public', options.inboxTable ?? 'inbox');
  const contentType: ContentType = options.contentType ?? 'application/json';

  async function ready(input: TestEvent): Promise<{ id: string; ready: Ready }> {
    const handler = handlers[input.aggregateType]?.[input.type];
    if (!handler) {
      const known = Object.keys(handlers[input.aggregateType] ?? {});
      throw new OutboxError(
        'HANDLER_NOT_FOUND',
        `No handler for aggregate type ${JSON.stringify(input.aggregateType)}, event type ${JSON.stringify(input.type)}; handled here: ${known.length ? known.join(', ') : '(none for this aggregate type)'}. The router would dead-letter it.`,
      );
    }
    const payload = options.codec ? await options.codec.decode(await options.codec.encode(input.aggregateType, input.type, input.payload, contentType), contentType) : input.payload;
    const event: RoutedEvent = { ...input, id: input.id ?? randomUUID(), headers: input.headers ?? {}, payload };
    // handlerCalls reads the event and its handler of a ready record; the rest is the record's Kafka side.
    return { id: event.id, ready: { event, handler } as Ready };
  }

  async function deliverAll(events: readonly TestEvent[]): Promise<Delivery[]> {
    const items = [];
    for (const event of events) items.push(await ready(event));
    try {
      const results = await applyMany(options.pool, inboxTable, consumer, items, { handlerTimeoutMs: options.handlerTimeoutMs, calls: (fresh) => handlerCalls(fresh) });
      return items.map((item, i) => ({ id: item.id, result: results[i] as ApplyResult }));
    } catch (error) {
      // The handler's own error (or the database's), as the test wrote it: not the router's wrapper.
      throw error instanceof HandlerFailed || error instanceof InboxUnavailable ? error.cause : error;
    }
  }

  return {
    async deliver(event) {
      const [delivery] = await deliverAll([event]);
      return delivery as Delivery;
    },
    deliverAll,
    async applied(ids) {
      const { rows } = await options.pool.query<{ id: string }>(
        `SELECT message_id::text AS id FROM ${inboxTable} WHERE consumer = $1 AND ($2::text[] IS NULL OR message_id::text = ANY($2::text[])) ORDER BY processed_at, message_id`,
        [consumer, ids ? [...ids] : null],
      );
      return rows.map((r) => r.id);
    },
  };
}
