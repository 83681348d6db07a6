import { randomUUID } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import type { Pool } from 'pg';
import type { OutboxConfig } from '../config';
import type { OutboxWriter } from '../producer';
import { percentiles, round } from './stats';

export interface LatencyRun {
  rate: number;
  seconds: number;
  committed: number;
  received: number;
  duplicates: number;
  /** Commit returned to the writer → record consumed by a kafkajs consumer. */
  commitToConsumeMs: Record<string, number>;
  /** Commit → the record's Kafka timestamp (Connect's producer send time). */
  commitToKafkaMs: Record<string, number>;
}

export interface LatencyOptions {
  config: OutboxConfig;
  pool: Pool;
  writer: OutboxWriter;
  topic: string;
  rate: number;
  seconds: number;
  onTick?: (sent: number, received: number) => void;
}

/**
 * Writes orders at a steady `rate` for `seconds` and times each event from its COMMIT to its arrival
 * on the routed topic. Events are matched by the `id` header the Event Router sets.
 */
export async function measureCdcLatency(options: LatencyOptions): Promise<LatencyRun> {
  const { config, pool, writer, topic, rate, seconds } = options;
  const commitAt = new Map<string, number>();
  const receivedAt = new Map<string, { at: number; kafkaTs: number }>();
  let duplicates = 0;

  const kafka = new Kafka({ clientId: 'outbox-bench', brokers: [...config.kafka.brokers], logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: `bench-${randomUUID()}`, maxWaitTimeInMs: 20, minBytes: 1, allowAutoTopicCreation: false });
  await consumer.connect();
  const joined = new Promise<void>((resolve) => consumer.on(consumer.events.GROUP_JOIN, () => resolve()));
  // A new group at the latest offsets: earlier runs' records are not re-read while measuring.
  await consumer.subscribe({ topics: [topic], fromBeginning: false });
  await consumer.run({
    eachMessage: async ({ message }) => {
      const id = message.headers?.id?.toString();
      if (!id) return;
      if (receivedAt.has(id)) duplicates++;
      else receivedAt.set(id, { at: Date.now(), kafkaTs: Number(message.timestamp) });
    },
  });
  await joined;

  let t0 = Date.now();
  try {
    const total = Math.round(rate * seconds);
    let started = 0;
    const inFlight = new Set<Promise<void>>();
    const writeOne = async () => {
      const client = await pool.connect();
      try {
        const orderId = randomUUID();
        await client.query('BEGIN');
        await client.query('INSERT INTO orders (id, customer_id, currency, total_cents, status) VALUES ($1, $2, $3, $4, $5)', [orderId, 'c-1', 'EUR', 2000, 'created']);
        const event = await writer.writeEvent(client, {
          aggregateType: 'order',
          aggregateId: orderId,
          type: 'OrderCreated',
          payload: { orderId, customerId: 'c-1', currency: 'EUR', totalCents: 2000, lines: [{ sku: 'SKU-1', quantity: 2, priceCents: 1000 }], placedAt: new Date() },
        });
        await client.query('COMMIT');
        commitAt.set(event.id, Date.now());
      } finally {
        client.release();
      }
    };

    t0 = Date.now();
    let lastTick = t0;
    while (started < total) {
      const due = Math.min(total, Math.floor(((Date.now() - t0) / 1000) * rate) + 1);
      while (started < due) {
        started++;
        const p = writeOne().finally(() => inFlight.delete(p));
        inFlight.add(p);
      }
      if (Date.now() - lastTick >= 1000) {
        lastTick = Date.now();
        options.onTick?.(commitAt.size, receivedAt.size);
      }
      await new Promise((r) => setTimeout(r, 2));
    }
    await Promise.all(inFlight);
    const deadline = Date.now() + 60_000;
    while ([...commitAt.keys()].some((id) => !receivedAt.has(id)) && Date.now() < deadline) {
      options.onTick?.(commitAt.size, receivedAt.size);
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    await consumer.disconnect();
  }

  const toConsume: number[] = [];
  const toKafka: number[] = [];
  for (const [id, committed] of commitAt) {
    const got = receivedAt.get(id);
    if (!got) continue;
    toConsume.push(got.at - committed);
    toKafka.push(got.kafkaTs - committed);
  }
  const rounded = (r: Record<string, number>) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, round(v)]));
  return {
    rate,
    seconds: round((Date.now() - t0) / 1000),
    committed: commitAt.size,
    received: [...commitAt.keys()].filter((id) => receivedAt.has(id)).length,
    duplicates,
    commitToConsumeMs: rounded(percentiles(toConsume)),
    commitToKafkaMs: rounded(percentiles(toKafka)),
  };
}
