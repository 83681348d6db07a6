/**
 * A user's own test of their handlers (examples/order-handlers.ts), as it would sit in their suite: the
 * handlers run through the router's real inbox transaction against a real database, without Kafka
 * (outbox-router/testing, docs/testing-handlers.md). Here the database is a fresh one on the local
 * stack's PostgreSQL; in your suite, your test database, provisioned once (`outbox db:provision`).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Client, Pool } from 'pg';
import { loadConfig } from 'outbox-router/config';
import { provision } from 'outbox-router/provision';
import { createHandlerHarness, type HandlerHarness } from 'outbox-router/testing';
import handlers from './order-handlers';

const database = `example_handlers_${randomBytes(6).toString('hex')}`;
const config = loadConfig({ env: {}, overrides: { database: { database } } });
const admin = () => new Client({ ...config.database, database: 'postgres' });
let pool: Pool;
let harness: HandlerHarness;

beforeAll(async () => {
  const c = admin();
  await c.connect();
  await c.query(`CREATE DATABASE ${database}`);
  await c.end();
  await provision(config);
  pool = new Pool({ ...config.database, max: 2 });
  await pool.query("CREATE TABLE orders (id uuid PRIMARY KEY, status text NOT NULL DEFAULT 'created')");
  harness = createHandlerHarness({ pool, handlers });
}, 60_000);

afterAll(async () => {
  await pool?.end();
  const c = admin();
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await c.end();
});

const statusOf = async (id: string) => (await pool.query<{ status: string }>('SELECT status FROM orders WHERE id = $1', [id])).rows[0]?.status;
const newOrder = async () => (await pool.query<{ id: string }>('INSERT INTO orders (id) VALUES ($1) RETURNING id', [randomUUID()])).rows[0]?.id as string;
const created = (orderId: string) => ({ aggregateType: 'order', aggregateId: orderId, type: 'OrderCreated', payload: { orderId } });
const cancelled = (orderId: string) => ({ aggregateType: 'order', aggregateId: orderId, type: 'OrderCancelled', payload: { orderId, reason: 'changed my mind' } });

test('OrderCreated confirms the order, in the same transaction as its inbox row', async () => {
  const orderId = await newOrder();
  const { id, result } = await harness.deliver(created(orderId));
  expect(result).toBe('applied');
  expect(await statusOf(orderId)).toBe('confirmed');
  expect(await harness.applied([id])).toEqual([id]);
});

test('a redelivery of the same event is skipped: the handler does not run again', async () => {
  const orderId = await newOrder();
  const event = { ...created(orderId), id: randomUUID() };
  expect((await harness.deliver(event)).result).toBe('applied');
  // Put the row back: had the handler run again, it would confirm it again.
  await pool.query("UPDATE orders SET status = 'created' WHERE id = $1", [orderId]);
  expect((await harness.deliver(event)).result).toBe('duplicate');
  expect(await statusOf(orderId)).toBe('created');
});

test('out of order: a cancel that arrives before the create leaves the order cancelled', async () => {
  const orderId = await newOrder();
  const results = await harness.deliverAll([cancelled(orderId), created(orderId)]);
  expect(results.map((r) => r.result)).toEqual(['applied', 'applied']);
  expect(await statusOf(orderId)).toBe('cancelled');
});
