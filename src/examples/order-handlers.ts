/**
 * Example handlers for `outbox router --handlers dist/examples/order-handlers.js`. Each runs inside the
 * inbox transaction (`ctx.tx`): its writes commit together with the inbox row, so a redelivered event
 * is skipped and the effect happens once.
 */
import type { Handlers } from '../router';

const handlers: Handlers = {
  order: {
    async OrderCreated(event, ctx) {
      const { orderId } = event.payload as { orderId: string };
      await ctx.tx.query("UPDATE orders SET status = 'confirmed' WHERE id = $1 AND status = 'created'", [orderId]);
    },
    async OrderCancelled(event, ctx) {
      const { orderId } = event.payload as { orderId: string };
      await ctx.tx.query("UPDATE orders SET status = 'cancelled' WHERE id = $1", [orderId]);
    },
  },
};

export default handlers;
