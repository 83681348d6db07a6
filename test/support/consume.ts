import type { IHeaders, KafkaMessage } from 'kafkajs';
import { randomName, testKafka } from './stack-env';
import { waitsUpTo } from './until';

export interface Received {
  topic: string;
  partition: number;
  offset: string;
  key: string;
  value: Buffer;
  headers: Record<string, string>;
  timestamp: number;
}

function headerMap(headers: IHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers ?? {})) {
    if (v === undefined) continue;
    const first = Array.isArray(v) ? v[0] : v;
    out[k] = Buffer.isBuffer(first) ? first.toString('utf8') : String(first);
  }
  return out;
}

/** Routed topics appear when Connect first produces to them: wait rather than fail the subscription. */
export async function waitForTopics(topics: string[], timeoutMs = 60_000): Promise<void> {
  const admin = testKafka().admin();
  await admin.connect();
  try {
    await waitsUpTo(timeoutMs, 200)(
      `topics ${topics.join(', ')} to appear`,
      async () => {
        const existing = new Set(await admin.listTopics());
        return topics.filter((t) => !existing.has(t));
      },
      (missing) => missing.length === 0,
    );
  } finally {
    await admin.disconnect();
  }
}

/**
 * Reads `topics` from the beginning with a fresh group until `done(records)` holds, or throws after
 * `timeoutMs` with what arrived so far.
 */
export async function collect(
  topics: string[] | RegExp,
  done: (records: Received[]) => boolean,
  timeoutMs = 60_000,
): Promise<Received[]> {
  if (Array.isArray(topics)) await waitForTopics(topics, Math.min(timeoutMs, 60_000));
  // read_committed, as the router reads: records of aborted Connect transactions (connector.exactlyOnce) are not events.
  const consumer = testKafka().consumer({ groupId: randomName('collect'), maxWaitTimeInMs: 100, allowAutoTopicCreation: true, readUncommitted: false });
  const records: Received[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: Array.isArray(topics) ? topics : [topics], fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`collect: condition not met within ${timeoutMs} ms; got ${records.length} records`)), timeoutMs);
      void consumer
        .run({
          eachMessage: async ({ topic, partition, message }: { topic: string; partition: number; message: KafkaMessage }) => {
            records.push({
              topic,
              partition,
              offset: message.offset,
              key: message.key?.toString('utf8') ?? '',
              value: message.value ?? Buffer.alloc(0),
              headers: headerMap(message.headers),
              timestamp: Number(message.timestamp),
            });
            if (done(records)) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
    return records;
  } finally {
    await consumer.disconnect();
  }
}
