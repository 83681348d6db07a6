import { setTimeout as sleep } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import { Partitioners, type Kafka } from 'kafkajs';
import { AVRO_CONTENT_TYPE, type Codec } from 'outbox-router/codec';
import type { Progress } from './progress';
import { round } from './stats';

export interface RawKafkaRun {
  partitions: number;
  produced: number;
  consumed: number;
  /** Produce (acks=all) and consume running at once: records consumed / (last consumed − first send). */
  eventsPerSecond: number;
  produceSeconds: number;
  producedPerSec: number;
  bytesPerRecord: number;
}

/**
 * The broker's ceiling on this machine for records like the pipelines' (the same Avro OrderCreated
 * values, keys and headers): kafkajs producing as fast as it can, acks=all, while a kafkajs consumer
 * reads the same topic. No database, no decoding: what Kafka and its clients can do on these cores.
 */
export async function measureRawKafka(options: { kafka: Kafka; codec: Pick<Codec, 'encode'>; topic: string; partitions: number; seconds: number; progress: Progress }): Promise<RawKafkaRun> {
  const { kafka, topic, partitions, seconds, progress } = options;
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: true });
  } finally {
    await admin.disconnect();
  }
  // Encoding is the writer's cost, not the broker's: 1,000 records are encoded once and sent again and again.
  const templates = await Promise.all(
    Array.from({ length: 1000 }, async () => {
      const orderId = randomUUID();
      const value = await options.codec.encode(
        'order',
        'OrderCreated',
        { orderId, customerId: 'c-1', currency: 'EUR', totalCents: 2000, lines: [{ sku: 'SKU-1', quantity: 2, priceCents: 1000 }], placedAt: new Date() },
        AVRO_CONTENT_TYPE,
      );
      return { key: orderId, value };
    }),
  );
  const bytesPerRecord = round(templates.reduce((n, t) => n + t.value.length + t.key.length, 0) / templates.length);

  let consumed = 0;
  let lastConsumedAt = 0;
  const consumer = kafka.consumer({ groupId: `${topic}-raw`, maxWaitTimeInMs: 50 });
  await consumer.connect();
  const joined = new Promise<void>((resolve) => consumer.on(consumer.events.GROUP_JOIN, () => resolve()));
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    partitionsConsumedConcurrently: partitions,
    eachBatch: async ({ batch }) => {
      consumed += batch.messages.length;
      lastConsumedAt = Date.now();
    },
  });
  await joined;
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  let produced = 0;
  const bar = progress.phase('raw kafka produce+consume', seconds, 's');
  const t0 = Date.now();
  const deadline = t0 + seconds * 1000;
  try {
    // A few sends in flight, 500 records each: what a busy kafkajs producer does.
    const sender = async () => {
      while (Date.now() < deadline) {
        const messages = Array.from({ length: 500 }, (_, i) => {
          const t = templates[(produced + i) % templates.length] as { key: string; value: Buffer };
          return { key: t.key, value: t.value, headers: { id: randomUUID(), eventType: 'OrderCreated', contentType: AVRO_CONTENT_TYPE } };
        });
        await producer.send({ topic, acks: -1, messages });
        produced += messages.length;
        bar.update(Math.min(seconds, Math.round((Date.now() - t0) / 1000)), { produced, consumed });
      }
    };
    await Promise.all([sender(), sender(), sender(), sender()]);
    const produceSeconds = (Date.now() - t0) / 1000;
    const drainDeadline = Date.now() + 60_000;
    while (consumed < produced && Date.now() < drainDeadline) await sleep(50);
    bar.done();
    const elapsed = Math.max(0.001, ((lastConsumedAt || Date.now()) - t0) / 1000);
    return {
      partitions,
      produced,
      consumed,
      eventsPerSecond: round(consumed / elapsed),
      produceSeconds: round(produceSeconds, 2),
      producedPerSec: round(produced / produceSeconds),
      bytesPerRecord,
    };
  } finally {
    await producer.disconnect().catch(() => {});
    await consumer.disconnect().catch(() => {});
  }
}
