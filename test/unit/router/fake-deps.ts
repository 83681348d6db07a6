import type { Message } from 'kafkajs';
import type { RecordDeps } from '../../../src/router/process-record';
import type { RouterStats } from '../../../src/router/types';
import { fakePool } from './fake-pool';

/**
 * The one builder of a record's dependencies for the router's unit tests: aggregate type `order`, a
 * JSON codec, the in-memory inbox of fake-pool.ts, millisecond backoffs, and dead letters and events
 * collected for the test to read. Tests override only what they are about.
 */
export function fakeDeps(overrides: Partial<RecordDeps> = {}) {
  const letters: Array<{ topic: string; message: Message }> = [];
  const events: string[] = [];
  const stats: RouterStats = { received: 0, applied: 0, duplicates: 0, retries: 0, deadLettered: 0, skipped: 0, infrastructureRetries: 0 };
  const d: RecordDeps = {
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
