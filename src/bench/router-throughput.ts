import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Partitioners, type Kafka } from 'kafkajs';
import type { Pool } from 'pg';
import { AVRO_CONTENT_TYPE, createCodec } from '../codec';
import type { OutboxConfig } from '../config';
import { createKafka } from '../kafka';
import { PROJECT_ROOT } from '../stack/paths';
import { round } from './stats';

export interface RouterThroughputRun {
  events: number;
  partitions: number;
  /** kafkajs eachBatch doing nothing with the records: the consume ceiling on this machine. */
  rawConsume: { seconds: number; eventsPerSecond: number };
  /** `outbox router` (a separate process): decode, inbox row + handler's one-row insert, offsets. */
  router: { seconds: number; startupSeconds: number; eventsPerSecond: number; rssMaxMb: number; lanes: number; maxTransactionRecords: number };
  ratio: number;
}

export interface RouterThroughputOptions {
  config: OutboxConfig;
  pool: Pool;
  events: number;
  partitions?: number;
  lanes?: number;
  maxTransactionRecords?: number;
  onTick?(phase: string, done: number, total: number): void;
  /** Topic, group and inbox consumer name (default benchrouter<time>); the bench puts its run id in it. */
  name?: string;
  /** The router child's pid, so CPU samples can tell it apart. */
  onChild?(pid: number): void;
}

/**
 * Router throughput against raw consumption of the same topic in the same run (issue 4's target:
 * ratio ≥ 0.5 and ≥ 5,000 events/s; RSS ≤ 200 MB). The topic is filled first, then drained twice:
 * by a bare kafkajs consumer, and by the `outbox router` CLI as an operator runs it, with a handlers
 * module whose handler writes one row through ctx.tx. Its RSS is sampled from /proc while it runs.
 */
export async function measureRouterThroughput(options: RouterThroughputOptions): Promise<RouterThroughputRun> {
  const { config, pool, events } = options;
  const partitions = options.partitions ?? 4;
  const lanes = options.lanes ?? 1;
  const maxTransactionRecords = options.maxTransactionRecords ?? 100;
  const run = options.name ?? `benchrouter${Date.now().toString(36)}`;
  const topic = `${run}.outbox.event.order`;
  const kafka = createKafka(config, { role: 'bench' });
  const admin = kafka.admin();
  await admin.connect();
  const dir = mkdtempSync(join(tmpdir(), 'outbox-bench-router-'));
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: true });
    await fill(kafka, config, topic, events, (n) => options.onTick?.('fill', n, events));

    const rawStarted = Date.now();
    await drainRaw(kafka, topic, events, (n) => options.onTick?.('raw consume', n, events));
    const rawSeconds = (Date.now() - rawStarted) / 1000;

    await pool.query('CREATE TABLE IF NOT EXISTS bench_effects (id uuid PRIMARY KEY, aggregate_id text NOT NULL, reason text NOT NULL)');
    const handlers = join(dir, 'handlers.js');
    writeFileSync(
      handlers,
      "module.exports = { order: { OrderCancelled: async (event, { tx }) => { await tx.query('INSERT INTO bench_effects (id, aggregate_id, reason) VALUES ($1, $2, $3)', [event.id, event.aggregateId, event.payload.reason]); } } };\n",
    );
    const { database } = config;
    const child = spawn(
      process.execPath,
      [
        join(PROJECT_ROOT, 'dist/cli/main.js'), '--log-level', 'warn', '--log-format', 'json', 'router',
        '--handlers', handlers, '--consumer', run, '--topics', `^${run}\\.outbox\\.event\\.`, '--metrics-port', '0',
        '--partitions', String(partitions), '--lanes', String(lanes), '--max-transaction-records', String(maxTransactionRecords),
      ],
      {
        env: { ...process.env, PGHOST: database.host, PGPORT: String(database.port), PGDATABASE: database.database, PGUSER: database.user, PGPASSWORD: database.password ?? '' },
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    );
    if (child.pid) options.onChild?.(child.pid);
    let rssMax = 0;
    const started = Date.now();
    // Process start and group join are not throughput: the clock starts at the first handled event.
    let first: { at: number; done: number } | undefined;
    try {
      for (;;) {
        rssMax = Math.max(rssMax, rssOf(child.pid));
        const { rows } = await pool.query<{ n: string }>('SELECT count(*) AS n FROM bench_effects');
        const done = Number(rows[0]?.n ?? 0);
        if (!first && done > 0) first = { at: Date.now(), done };
        options.onTick?.('router', done, events);
        if (done >= events) break;
        if (child.exitCode !== null) throw new Error(`bench: the router exited with code ${child.exitCode} before handling every event`);
        if (Date.now() - started > 600_000) throw new Error(`bench: the router handled ${done} of ${events} events in 10 minutes`);
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
    }
    const ended = Date.now();
    const routerSeconds = (ended - (first?.at ?? started)) / 1000;
    const rawRate = events / rawSeconds;
    const routerRate = (events - (first?.done ?? 0)) / routerSeconds;
    return {
      events,
      partitions,
      rawConsume: { seconds: round(rawSeconds, 2), eventsPerSecond: round(rawRate) },
      router: { seconds: round(routerSeconds, 2), startupSeconds: round(((first?.at ?? ended) - started) / 1000, 2), eventsPerSecond: round(routerRate), rssMaxMb: round(rssMax / 2 ** 20), lanes, maxTransactionRecords },
      ratio: round(routerRate / rawRate, 3),
    };
  } finally {
    await admin.deleteTopics({ topics: [topic] }).catch(() => {});
    await admin.disconnect();
    await pool.query('DROP TABLE IF EXISTS bench_effects').catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Event Router-shaped records (Avro through the registry), in batches of 1,000. */
async function fill(kafka: Kafka, config: OutboxConfig, topic: string, events: number, tick: (n: number) => void): Promise<void> {
  const codec = createCodec({ registry: config.registry, autoRegister: true, topicFor: () => topic });
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  try {
    for (let sent = 0; sent < events; ) {
      const n = Math.min(1000, events - sent);
      const messages = await Promise.all(
        Array.from({ length: n }, async (_, i) => {
          const key = `order-${(sent + i) % 500}`;
          const value = await codec.encode('order', 'OrderCancelled', { orderId: key, reason: String(sent + i), cancelledAt: new Date() }, AVRO_CONTENT_TYPE);
          return { key, value, headers: { id: randomUUID(), eventType: 'OrderCancelled', contentType: AVRO_CONTENT_TYPE } };
        }),
      );
      await producer.send({ topic, acks: -1, messages });
      sent += n;
      tick(sent);
    }
  } finally {
    await producer.disconnect();
  }
}

async function drainRaw(kafka: Kafka, topic: string, events: number, tick: (n: number) => void): Promise<void> {
  const consumer = kafka.consumer({ groupId: `${topic}-raw`, maxWaitTimeInMs: 50 });
  await consumer.connect();
  let seen = 0;
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      consumer
        .run({
          partitionsConsumedConcurrently: 4,
          eachBatch: async ({ batch }) => {
            seen += batch.messages.length;
            tick(seen);
            if (seen >= events) resolve();
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
}

function rssOf(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}
