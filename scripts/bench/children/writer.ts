/**
 * The bench's writer, a child process of its own (forked by scripts/bench/writer-process.ts), so the
 * writer never shares an event loop with the router, the relay or the measuring. It writes one event
 * per autocommitted transaction at a fixed rate (scripts/bench/pacing.ts) and stamps the DATABASE clock:
 *
 * - `sql`: one plain INSERT … SELECT whose JSON payload carries `writtenAt: clock_timestamp()` and the
 *   step's label (a named prepared statement, autocommitted);
 * - `writer`: `createOutboxWriter` (JSON) in BEGIN … COMMIT, with `clock_timestamp()` stored in
 *   bench_written as the transaction's last statement.
 *
 * Its event-loop delay (perf_hooks.monitorEventLoopDelay) over each step goes back to the parent.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Pool, PoolClient } from 'pg';
import { createCodec, topicForReplacement } from 'outbox-router/codec';
import type { OutboxConfig } from 'outbox-router/config';
import { createPool, qualified } from 'outbox-router/db';
import { createOutboxWriter, type OutboxWriter } from 'outbox-router/producer';
import { pace } from '../pacing';
import type { WriterReply, WriterRequest } from '../writer-protocol';

let pool: Pool | undefined;
let writer: OutboxWriter | undefined;
let insertSql = '';
const idle: PoolClient[] = [];
const delay = monitorEventLoopDelay({ resolution: 10 });
delay.enable();

const reply = (message: WriterReply) => process.send?.(message);

async function init(config: OutboxConfig, mode: 'sql' | 'writer', connections: number): Promise<void> {
  pool = createPool(config.database, { max: connections, application_name: 'outbox-bench-writer' });
  for (let i = 0; i < connections; i++) idle.push(await pool.connect());
  const table = qualified(config.outbox.schema, config.outbox.table);
  insertSql =
    `INSERT INTO ${table} (id, aggregate_type, aggregate_id, event_type, payload, content_type) ` +
    `SELECT i, 'order', i::text, 'OrderCreated', convert_to(json_build_object('orderId', i, 'step', $1::text, 'writtenAt', clock_timestamp())::text, 'UTF8'), 'application/json' ` +
    'FROM gen_random_uuid() AS i';
  if (mode === 'writer') {
    const codec = createCodec({ registry: config.registry, topicFor: topicForReplacement(config.connector.topicReplacement) });
    writer = createOutboxWriter({ outbox: config.outbox, codec, contentType: 'application/json' });
  }
}

async function withIdle(body: (client: PoolClient) => Promise<void>): Promise<void> {
  const client = idle.pop();
  // pace() never has more in flight than connections, so a client is always free.
  if (!client) throw new Error('bench writer: no idle connection');
  try {
    await body(client);
  } finally {
    idle.push(client);
  }
}

function sendOne(step: string): Promise<void> {
  return withIdle(async (client) => {
    if (!writer) {
      await client.query({ name: 'bench-outbox-insert', text: insertSql, values: [step] });
      return;
    }
    const orderId = crypto.randomUUID();
    await client.query('BEGIN');
    try {
      const [written] = await writer.writeEvents(client, [{ aggregateType: 'order', aggregateId: orderId, type: 'OrderCreated', payload: { orderId, step } }]);
      await client.query({ name: 'bench-written', text: 'INSERT INTO bench_written (id, step, written_at) VALUES ($1, $2, clock_timestamp())', values: [written?.id, step] });
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    }
  });
}

async function run(step: string, rate: number, seconds: number, connections: number): Promise<void> {
  delay.reset();
  let lastProgress = 0;
  const result = await pace({
    rate,
    seconds,
    concurrency: connections,
    send: () => sendOne(step),
    onDone: (done) => {
      const t = Date.now();
      if (t - lastProgress >= 100) {
        lastProgress = t;
        reply({ type: 'progress', step, done });
      }
    },
  });
  const ms = (ns: number) => Math.round(ns / 1e4) / 100;
  reply({ type: 'result', step, run: result, eventLoopMs: { p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), max: ms(delay.max) } });
}

let connections = 8;
process.on('message', (message: WriterRequest) => {
  void (async () => {
    try {
      if (message.type === 'init') {
        connections = message.connections;
        await init(message.config, message.mode, connections);
        reply({ type: 'ready', pid: process.pid });
      } else if (message.type === 'run') {
        await run(message.step, message.rate, message.seconds, connections);
      } else if (message.type === 'stop') {
        for (const c of idle.splice(0)) c.release();
        await pool?.end().catch(() => {});
        process.exit(0);
      }
    } catch (error) {
      reply({ type: 'error', message: (error as Error)?.message ?? String(error) });
    }
  })();
});
process.on('disconnect', () => process.exit(0));
