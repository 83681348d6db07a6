/**
 * Example handlers for `outbox router --handlers build/examples/order-handlers.js`. Each runs inside the
 * inbox transaction (`ctx.tx`): its writes commit together with the inbox rows, so a redelivered event
 * is skipped and the effect happens once.
 *
 * Both are batch handlers (docs/library.md, "Batch handlers"): the router gives each the fresh events of
 * a run of consecutive records of its type, in order, and each writes them in ONE statement (UPDATE …
 * FROM unnest), so a chunk of 50 events costs one statement instead of 50. A per-event handler,
 * `async (event, ctx) => …`, does the same one event at a time.
 */
import type { BatchHandler, Handlers } from 'outbox-router/router';
// Generated from schemas/ by `outbox schemas:types`: a handler for an event type that has no schema does not compile.
import type { EventMap } from './outbox-events';

/** Any event of the order aggregate: what a batch function shared by its event types may rely on. */
type OrderEvent = EventMap['order'][keyof EventMap['order']];

/** The order ids of the events, in order (an order twice in a run is updated once: the same result). */
const orderIds = (events: ReadonlyArray<{ payload: OrderEvent }>) => events.map((e) => e.payload.orderId);

const confirm: BatchHandler<OrderEvent> = async (events, ctx) => {
  await ctx.tx.query("UPDATE orders o SET status = 'confirmed' FROM unnest($1::uuid[]) AS e(id) WHERE o.id = e.id AND o.status = 'created'", [orderIds(events)]);
};

const cancel: BatchHandler<OrderEvent> = async (events, ctx) => {
  await ctx.tx.query("UPDATE orders o SET status = 'cancelled' FROM unnest($1::uuid[]) AS e(id) WHERE o.id = e.id", [orderIds(events)]);
};

const handlers: Handlers<EventMap> = {
  order: {
    OrderCreated: { batch: confirm },
    OrderCancelled: { batch: cancel },
  },
};

export default handlers;
