import type { KafkaMessage, Message } from 'kafkajs';
import { runPartitionBatch } from '../../../src/router/partition-batch';
import type { BatchScope, Outcome, RouterDeps } from '../../../src/router/record-context';
import type { RouterStats } from '../../../src/router/types';
import { fakePool } from './fake-pool';

/** A router's dependencies and one batch's scope in one object: pass it as both. */
export type FakeDeps = RouterDeps & BatchScope;

/**
 * The one builder of a record's dependencies for the router's unit tests: aggregate type `order`, a
 * JSON codec, the in-memory inbox of fake-pool.ts, millisecond backoffs, and dead letters and events
 * collected for the test to read. Tests override only what they are about.
 */
export function fakeDeps(overrides: Partial<FakeDeps> = {}) {
  const letters: Array<{ topic: string; message: Message }> = [];
  const events: string[] = [];
  const stats: RouterStats = { received: 0, applied: 0, duplicates: 0, retries: 0, deadLettered: 0, skipped: 0, infrastructureRetries: 0 };
  const d: FakeDeps = {
    handlers: { order: { OrderCreated: async () => {} } },
    codec: { decode: async (bytes: Buffer) => JSON.parse(bytes.toString()) },
    pool: fakePool().pool,
    inboxTable: '"public"."inbox"',
    consumer: 'c',
    maxAttempts: 3,
    backoff: { initialDelayMs: 1, maxDelayMs: 2 },
    infrastructureBackoff: { initialDelayMs: 1, maxDelayMs: 2 },
    aggregateTypeOf: () => 'order',
    dlqTopicFor: () => 'outbox.dlq.order',
    sendDeadLetter: async (topic, message) => void letters.push({ topic, message }),
    heartbeat: async () => {},
    signal: new AbortController().signal,
    stats,
    emit: (name) => void events.push(name),
    ...overrides,
  };
  return { d, letters, events, stats: d.stats };
}

/**
 * One record through the router's real entry point (a batch of one, one lane, a transaction per
 * record), and what became of it, read from the stats: 'aborted' when its offset was not resolved.
 */
export async function routeOne(topic: string, partition: number, message: KafkaMessage, d: FakeDeps): Promise<Outcome> {
  const before = { ...d.stats };
  const resolved: string[] = [];
  await runPartitionBatch(topic, partition, [message], d, d, { lanes: 1, maxTransactionRecords: 1, resolveOffset: (o) => resolved.push(o), progress: async () => {}, stopped: () => false, revoked: () => false });
  if (resolved.length === 0) return 'aborted';
  const grew = (key: keyof RouterStats) => d.stats[key] > before[key];
  return grew('applied') ? 'applied' : grew('duplicates') ? 'duplicate' : grew('deadLettered') ? 'dead-lettered' : grew('skipped') ? 'skipped' : 'aborted';
}
