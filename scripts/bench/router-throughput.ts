import { setTimeout as sleep } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Partitioners, type Kafka } from 'kafkajs';
import type { Client, Pool } from 'pg';
import { AVRO_CONTENT_TYPE, createCodec } from 'outbox-router/codec';
import type { OutboxConfig } from 'outbox-router/config';
import { createKafka } from 'outbox-router/kafka';
import type { Logger } from 'outbox-router/log';
import { startBenchRouter } from './cli-process';
import { cpuPerEvent, startLoad, type Load, type LoadWindow } from './load';
import { createBenchTables, type HandlerKind } from './pipeline';
import { round } from './stats';
import type { EventLoopDelay } from './writer-protocol';

export interface RouterDrain {
  handler: HandlerKind;
  /** False: this router rejected the handler form (the batch API is not in it). */
  supported: boolean;
  reason?: string;
  seconds: number;
  startupSeconds: number;
  eventsPerSecond: number;
  rssMaxMb: number;
  /** CPU per process group while it drained, and per event. */
  load?: Load;
  cpuUsPerEvent: Record<string, number>;
  eventLoopMs?: EventLoopDelay;
}

export interface RouterThroughputRun {
  events: number;
  partitions: number;
  lanes: number;
  maxTransactionRecords: number;
  /** kafkajs eachBatch doing nothing with the records: the consume ceiling on this machine. */
  rawConsume: { seconds: number; eventsPerSecond: number };
  /** `outbox router` (a separate process) with the bench handler module, per-event then batch form. */
  perEvent: RouterDrain;
  batch: RouterDrain;
  /** Per-event router ÷ raw consume. */
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
  /** Topic, group and inbox consumer name prefix; the bench puts its run id in it. */
  name: string;
  dir: string;
  admin?: Client;
  log: Logger;
}

/**
 * Router throughput against raw consumption of the same topic in the same run. The topic is filled
 * first, then drained by a bare kafkajs consumer, then twice by the `outbox router` CLI as an operator
 * runs it (each time a fresh consumer, so from the beginning), with the bench handlers module in its
 * per-event form and in its batch form (BENCH_HANDLER=batch). A router without the batch API rejects
 * the module: that drain is reported as not supported, not as a failure.
 */
export async function measureRouterThroughput(options: RouterThroughputOptions): Promise<RouterThroughputRun> {
  const { config, pool, events } = options;
  const partitions = options.partitions ?? 4;
  const lanes = options.lanes ?? 1;
  const maxTransactionRecords = options.maxTransactionRecords ?? 500; // the router's default (maxTransactionRecords)
  const run = options.name;
  const topic = `${run}.outbox.event.order`;
  const kafka = createKafka(config, { role: 'bench' });
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: true });
    await fill(kafka, config, topic, events, (n) => options.onTick?.('fill', n, events));

    const rawStarted = Date.now();
    await drainRaw(kafka, topic, events, (n) => options.onTick?.('raw consume', n, events));
    const rawSeconds = (Date.now() - rawStarted) / 1000;

    await createBenchTables(pool);
    const drain = (handler: HandlerKind) =>
      drainWithRouter({ ...options, partitions, lanes, maxTransactionRecords, topic, handler, consumer: `${run}-${handler}` });
    const perEvent = await drain('per-event');
    const batch = await drain('batch');
    const rawRate = events / rawSeconds;
    return {
      events,
      partitions,
      lanes,
      maxTransactionRecords,
      rawConsume: { seconds: round(rawSeconds, 2), eventsPerSecond: round(rawRate) },
      perEvent,
      batch,
      ratio: round(perEvent.eventsPerSecond / rawRate, 3),
    };
  } finally {
    await admin.deleteTopics({ topics: [topic] }).catch(() => {});
    await admin.disconnect();
    await pool.query('DROP TABLE IF EXISTS bench_handled, bench_written').catch(() => {});
  }
}

async function drainWithRouter(
  o: RouterThroughputOptions & { partitions: number; lanes: number; maxTransactionRecords: number; topic: string; handler: HandlerKind; consumer: string },
): Promise<RouterDrain> {
  const { pool, events } = o;
  await pool.query('TRUNCATE bench_handled');
  const router = startBenchRouter({
    ...o,
    topics: `^${o.topic.replace(/\./g, '\\.')}$`,
    args: ['--partitions', String(o.partitions), '--lanes', String(o.lanes), '--max-transaction-records', String(o.maxTransactionRecords)],
  });
  const phase = `router (${o.handler})`;
  let rssMax = 0;
  const started = Date.now();
  // Process start and group join are not throughput: the clock starts at the first handled event.
  let first: { at: number; done: number; window: LoadWindow } | undefined;
  let done = 0;
  try {
    for (;;) {
      rssMax = Math.max(rssMax, rssOf(router.pid));
      const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM bench_handled');
      done = rows[0]?.n ?? 0;
      if (!first && done > 0) {
        await router.eventLoop().catch(() => undefined);
        first = { at: Date.now(), done, window: await startLoad(o.admin, o.config.database.database) };
      }
      o.onTick?.(phase, done, events);
      if (done >= events) break;
      if (router.exitCode() !== null) {
        const why = router.problems().slice(-2).join(' | ') || `exit code ${router.exitCode()}`;
        if (!first && o.handler === 'batch') return { handler: o.handler, supported: false, reason: `not supported by this router: ${why}`, seconds: 0, startupSeconds: 0, eventsPerSecond: Number.NaN, rssMaxMb: 0, cpuUsPerEvent: {} };
        throw new Error(`bench: the router (${o.handler}) exited before handling every event: ${why}`);
      }
      if (Date.now() - started > 600_000) throw new Error(`bench: the router (${o.handler}) handled ${done} of ${events} events in 10 minutes`);
      await sleep(100);
    }
    const ended = Date.now();
    const load = first ? await first.window.end() : undefined;
    const eventLoopMs = await router.eventLoop().catch(() => undefined);
    const seconds = (ended - (first?.at ?? started)) / 1000;
    const counted = events - (first?.done ?? 0);
    return {
      handler: o.handler,
      supported: true,
      seconds: round(seconds, 2),
      startupSeconds: round(((first?.at ?? ended) - started) / 1000, 2),
      eventsPerSecond: round(counted / seconds),
      rssMaxMb: round(rssMax / 2 ** 20),
      ...(load ? { load } : {}),
      cpuUsPerEvent: load ? cpuPerEvent(load, counted) : {},
      ...(eventLoopMs ? { eventLoopMs } : {}),
    };
  } finally {
    await router.stop();
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
