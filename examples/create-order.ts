/**
 * The source article's CreateOrder: the order row and its OrderCreated event commit in ONE transaction,
 * so there is never an order without its event, nor an event without its order.
 *
 *   node build/examples/create-order.js            # one order on the local stack (after db:provision
 *                                                   # and schemas:register)
 */
import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import type { OutboxEventOf, OutboxWriter, WrittenEvent } from 'outbox-router/producer';
// Generated from schemas/ by `outbox schemas:types --schemas schemas --out examples/outbox-events.ts`.
import type { EventMap, OrderLine } from './outbox-events';

export type { OrderLine };

/** A writer typed by the schemas: `type`, `aggregateType` and `payload` are checked at compile time. */
export type OrderWriter = OutboxWriter<OutboxEventOf<EventMap>>;

export interface NewOrder {
  id?: string;
  customerId: string;
  currency: string;
  lines: OrderLine[];
  traceparent?: string;
}

export interface CreatedOrder {
  orderId: string;
  totalCents: number;
  event: WrittenEvent;
}

/** The example's business table (the application's own, not provisioned by outbox-router). */
export const ORDERS_DDL = `CREATE TABLE IF NOT EXISTS orders (
  id          uuid        PRIMARY KEY,
  customer_id text        NOT NULL,
  currency    text        NOT NULL,
  total_cents bigint      NOT NULL,
  status      text        NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
)`;

export interface CreateOrderOptions {
  /** Throw after both inserts, before COMMIT: shows that a rolled-back order publishes nothing. */
  failBeforeCommit?: boolean;
}

export async function createOrder(pool: Pool, outbox: OrderWriter, order: NewOrder, options: CreateOrderOptions = {}): Promise<CreatedOrder> {
  const orderId = order.id ?? randomUUID();
  const totalCents = order.lines.reduce((sum, line) => sum + line.quantity * line.priceCents, 0);
  const client: PoolClient = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('INSERT INTO orders (id, customer_id, currency, total_cents, status) VALUES ($1, $2, $3, $4, $5)', [
      orderId,
      order.customerId,
      order.currency,
      totalCents,
      'created',
    ]);
    const event = await outbox.writeEvent(client, {
      aggregateType: 'order',
      aggregateId: orderId,
      type: 'OrderCreated',
      traceparent: order.traceparent,
      payload: { orderId, customerId: order.customerId, currency: order.currency, totalCents, lines: order.lines, placedAt: new Date() },
    });
    if (options.failBeforeCommit) throw new Error(`order ${orderId} failed on purpose before COMMIT`);
    await client.query('COMMIT'); // the order and its event become visible (and reach the WAL stream) together
    return { orderId, totalCents, event };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/** `node build/examples/create-order.js`: one order on the configured database (default: the local stack). */
async function main(): Promise<void> {
  const { loadConfig } = await import('outbox-router/config');
  const { createCodec, topicForReplacement } = await import('outbox-router/codec');
  const { createOutboxWriter } = await import('outbox-router/producer');
  const { createPool } = await import('outbox-router/db');
  const config = loadConfig();
  const pool = createPool(config.database);
  try {
    await pool.query(ORDERS_DDL);
    const outbox = createOutboxWriter<EventMap>({ outbox: config.outbox, codec: createCodec({ registry: config.registry, topicFor: topicForReplacement(config.connector.topicReplacement) }) });
    const created = await createOrder(pool, outbox, { customerId: 'customer-1', currency: 'EUR', lines: [{ sku: 'BOOK-42', quantity: 2, priceCents: 1999 }] });
    process.stdout.write(`order ${created.orderId} (${created.totalCents} cents) committed with event ${created.event.id} (${created.event.bytes} bytes ${created.event.contentType})\n`);
  } finally {
    await pool.end();
  }
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`create-order: ${(error as Error).message}\n`);
    process.exitCode = 1;
  });
}
