import { randomUUID } from 'node:crypto';
import type { Consumer, IHeaders, Kafka } from 'kafkajs';
import type { Logger } from '../log';

/** One dead letter as read from its topic: what the page shows is made from it on demand. */
export interface CachedLetter {
  topic: string;
  partition: number;
  offset: string;
  /** The dead letter's Kafka timestamp (epoch ms). */
  timestamp: number;
  key: string | null;
  value: Buffer | null;
  headers: IHeaders;
}

export interface DlqTopicInfo {
  topic: string;
  /** Dead letters held here (the newest `limit`). */
  cached: number;
  /** Older ones read and let go: they are still in the topic. */
  dropped: number;
}

export interface DlqCache {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Looks for dead-letter topics that appeared since the last look and reads them too (a new subscription). */
  refresh(): Promise<void>;
  topics(): DlqTopicInfo[];
  letters(topic: string): readonly CachedLetter[];
  /** The reading's last failure, for the page; undefined while it works. */
  error(): string | undefined;
}

export interface DlqCacheOptions {
  kafka: Kafka;
  /** The dead-letter topics (src/topics: `^outbox\.dlq\..+$` by default). */
  pattern: RegExp;
  /** Letters kept per topic, the newest. */
  limit: number;
  logger?: Logger;
}

/**
 * The dead letters the page lists, held in memory: one consumer reads every dead-letter topic from its
 * start and keeps the newest `limit` letters of each. Its group (`outbox-console-<uuid>`) commits no
 * offset, so nothing of it stays on the brokers once it leaves. kafkajs subscribes a pattern to the
 * topics that exist when it subscribes: `refresh` (each sample) restarts the consumer when a new
 * dead-letter topic appears, skipping what it already holds. Dead letters are never changed here:
 * replaying or releasing goes through the CLI's code (dlq-operations.ts).
 */
export function createDlqCache(options: DlqCacheOptions): DlqCache {
  const store = new Map<string, { letters: CachedLetter[]; dropped: number; next: Map<number, bigint> }>();
  let consumer: Consumer | undefined;
  let subscribed = new Set<string>();
  let lastError: string | undefined;
  let stopped = false;
  let switching: Promise<void> = Promise.resolve();

  const keep = (letter: CachedLetter) => {
    let topic = store.get(letter.topic);
    if (!topic) store.set(letter.topic, (topic = { letters: [], dropped: 0, next: new Map() }));
    const offset = BigInt(letter.offset);
    // Read again after a restart of the consumer: already held (or let go).
    if (offset < (topic.next.get(letter.partition) ?? 0n)) return;
    topic.next.set(letter.partition, offset + 1n);
    topic.letters.push(letter);
    if (topic.letters.length > options.limit) {
      topic.letters.shift();
      topic.dropped++;
    }
  };

  async function listTopics(): Promise<string[]> {
    const admin = options.kafka.admin();
    await admin.connect();
    try {
      return (await admin.listTopics()).filter((t) => options.pattern.test(t)).sort();
    } finally {
      await admin.disconnect().catch(() => {});
    }
  }

  async function subscribe(topics: string[]): Promise<void> {
    const previous = consumer;
    consumer = undefined;
    await previous?.disconnect().catch(() => {});
    subscribed = new Set(topics);
    if (topics.length === 0 || stopped) return;
    // kafkajs's default fetch wait (5 s): a fetch returns as soon as a letter arrives, and an idle console polls rarely.
    const next = options.kafka.consumer({ groupId: `outbox-console-${randomUUID()}`, readUncommitted: false });
    consumer = next;
    await next.connect();
    await next.subscribe({ topics, fromBeginning: true });
    await next.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        for (const m of batch.messages) {
          keep({ topic: batch.topic, partition: batch.partition, offset: m.offset, timestamp: Number(m.timestamp), key: m.key?.toString('utf8') ?? null, value: m.value ?? null, headers: m.headers ?? {} });
        }
      },
    });
    next.on(next.events.CRASH, (e) => {
      lastError = `reading the dead-letter topics failed: ${String((e.payload as { error?: Error }).error?.message ?? 'unknown')}`;
    });
  }

  const refresh = () => {
    switching = switching.then(async () => {
      if (stopped) return;
      try {
        const topics = await listTopics();
        lastError = undefined;
        if (topics.length === subscribed.size && topics.every((t) => subscribed.has(t))) return;
        options.logger?.info({ event: 'console.dlq-topics', topics }, 'console: reading dead-letter topics');
        await subscribe(topics);
      } catch (error) {
        lastError = `cannot read the dead-letter topics: ${(error as Error).message}`;
        options.logger?.warn({ event: 'console.dlq-unreadable', err: error }, lastError);
      }
    });
    return switching;
  };

  return {
    start: refresh,
    refresh,
    async stop() {
      stopped = true;
      await switching.catch(() => {});
      await consumer?.disconnect().catch(() => {});
      consumer = undefined;
    },
    topics: () => [...new Set([...subscribed, ...store.keys()])].sort().map((topic) => ({ topic, cached: store.get(topic)?.letters.length ?? 0, dropped: store.get(topic)?.dropped ?? 0 })),
    letters: (topic) => store.get(topic)?.letters ?? [],
    error: () => lastError,
  };
}
