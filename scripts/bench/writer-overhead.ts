import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { OutboxWriter } from 'outbox-router/producer';

export interface WriterRun {
  mode: string;
  transactions: number;
  seconds: number;
  tps: number;
}

/**
 * Business transactions at fixed concurrency for `seconds`: BEGIN, one orders row, optionally one
 * outbox event through `writer`, COMMIT. The same loop with and without the event gives the
 * writer's overhead on the business path.
 */
/** How a run writes the event: a separate INSERT (writeEvent) or inside the business statement (prepareInsert). */
export type WriterStyle = 'statement' | 'same-statement';

export async function measureWriter(
  pool: Pool,
  mode: string,
  writer: OutboxWriter | undefined,
  concurrency: number,
  seconds: number,
  onTick?: (done: number) => void,
  style: WriterStyle = 'statement',
): Promise<WriterRun> {
  let transactions = 0;
  const deadline = Date.now() + seconds * 1000;
  const ticker = setInterval(() => onTick?.(transactions), 1000);
  const worker = async () => {
    const client = await pool.connect();
    try {
      while (Date.now() < deadline) {
        const orderId = randomUUID();
        const orderRow = [orderId, 'c-1', 'EUR', 2000, 'created'];
        const insertOrder = 'INSERT INTO orders (id, customer_id, currency, total_cents, status) VALUES ($1, $2, $3, $4, $5)';
        const event = {
          aggregateType: 'order',
          aggregateId: orderId,
          type: 'OrderCreated',
          payload: { orderId, customerId: 'c-1', currency: 'EUR', totalCents: 2000, lines: [{ sku: 'SKU-1', quantity: 2, priceCents: 1000 }], placedAt: new Date() },
        };
        if (writer && style === 'same-statement') {
          // BEGIN/COMMIT kept so every mode has the same transaction framing; only the INSERTs differ.
          const prepared = await writer.prepareInsert([event], { firstParam: orderRow.length + 1 });
          await client.query('BEGIN');
          await client.query(`WITH o AS (${insertOrder}) ${prepared.text}`, [...orderRow, ...prepared.values]);
          await client.query('COMMIT');
        } else {
          await client.query('BEGIN');
          await client.query(insertOrder, orderRow);
          if (writer) await writer.writeEvent(client, event);
          await client.query('COMMIT');
        }
        transactions++;
      }
    } finally {
      client.release();
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  clearInterval(ticker);
  const elapsed = (Date.now() - started) / 1000;
  return { mode, transactions, seconds: elapsed, tps: transactions / elapsed };
}
