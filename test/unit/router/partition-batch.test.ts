import type { KafkaMessage } from 'kafkajs';
import { laneOf, runPartitionBatch } from '../../../src/router/partition-batch';
import type { RecordDeps } from '../../../src/router/process-record';
import type { RouterStats } from '../../../src/router/types';

const ID = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

function message(offset: number, key: string): KafkaMessage {
  return {
    key: Buffer.from(key),
    value: Buffer.from(JSON.stringify({ n: offset })),
    headers: { id: ID(offset), eventType: 'E', contentType: 'application/json' },
    offset: String(offset),
    timestamp: '0',
    attributes: 0,
  } as KafkaMessage;
}

/** A pool stand-in for single-record transactions; each handler call can be delayed to reorder lanes. */
function deps(handler: (payload: { n: number }) => Promise<void>): RecordDeps {
  const stats: RouterStats = { received: 0, applied: 0, duplicates: 0, retries: 0, deadLettered: 0, skipped: 0, infrastructureRetries: 0 };
  const pool = {
    connect: async () => ({
      query: async (sql: string) => (sql.startsWith('INSERT') ? { rowCount: 1 } : { command: sql.split(' ')[0] }),
      release: () => {},
    }),
  };
  return {
    handlers: { t: { E: async (event) => handler(event.payload as { n: number }) } },
    codec: { decode: async (bytes: Buffer) => JSON.parse(bytes.toString()) },
    pool: pool as never,
    inboxTable: 'inbox',
    consumer: 'c',
    maxAttempts: 1,
    backoff: { initialDelayMs: 1, maxDelayMs: 1 },
    infrastructureBackoff: { initialDelayMs: 1, maxDelayMs: 1 },
    aggregateTypeOf: () => 't',
    dlqTopicFor: () => 'dlq',
    sendDeadLetter: async () => {},
    heartbeat: async () => {},
    signal: new AbortController().signal,
    stats,
    emit: () => {},
  };
}

describe('laneOf', () => {
  it('is stable for a key and spreads keys over the lanes', () => {
    expect(laneOf(Buffer.from('order-1'), 8)).toBe(laneOf('order-1', 8));
    const lanes = new Set(Array.from({ length: 200 }, (_, i) => laneOf(`k${i}`, 8)));
    expect(lanes.size).toBe(8);
    expect(laneOf(null, 8)).toBe(0);
    expect(laneOf('x', 1)).toBe(0);
  });
});

describe('runPartitionBatch', () => {
  it('keeps each key in offset order across lanes and resolves only a contiguous prefix of offsets', async () => {
    const keys = ['a', 'b', 'c', 'd'];
    const messages = Array.from({ length: 40 }, (_, i) => message(i, keys[i % keys.length] as string));
    const handled: number[] = [];
    const resolved: string[] = [];
    // Later records finish sooner: lanes race, and a naive "resolve when done" would skip past holes.
    const d = deps(async ({ n }) => {
      await new Promise((r) => setTimeout(r, (40 - n) % 7));
      handled.push(n);
    });
    const last = await runPartitionBatch('t', 0, messages, d, { lanes: 4, maxTransactionRecords: 1, resolveOffset: (o) => resolved.push(o), progress: async () => {}, stopped: () => false });
    expect(last).toBe('39');
    expect(resolved).toEqual(messages.map((m) => m.offset)); // every offset, in order, each once
    for (const key of keys) {
      const mine = handled.filter((n) => keys[n % keys.length] === key);
      expect(mine).toEqual([...mine].sort((x, y) => x - y));
    }
    expect(d.stats.applied).toBe(40);
  });

  it('leaves the rest of the batch unresolved when stopped in the middle', async () => {
    const messages = Array.from({ length: 10 }, (_, i) => message(i, 'k'));
    const resolved: string[] = [];
    let handledCount = 0;
    const d = deps(async () => {
      handledCount++;
    });
    await runPartitionBatch('t', 0, messages, d, { lanes: 1, maxTransactionRecords: 1, resolveOffset: (o) => resolved.push(o), progress: async () => {}, stopped: () => handledCount >= 3 });
    expect(resolved).toEqual(['0', '1', '2']);
  });
});
