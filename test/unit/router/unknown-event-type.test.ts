import type { KafkaMessage } from 'kafkajs';
import { fakeDeps, routeOne, type FakeDeps } from './fake-deps';

/** An event type the router has no handler for: dead-letter, skip or block, by default or per aggregate type. */
const record = {
  key: Buffer.from('order-1'),
  value: Buffer.from('{"n":1}'),
  headers: { id: '0b7e3c1c-8a63-4c9a-9a51-0d2a8c1f5e77', eventType: 'OrderShipped', contentType: 'application/json' },
  offset: '7',
  timestamp: '0',
  attributes: 0,
} as KafkaMessage;

const deps = (overrides: Partial<FakeDeps>) => fakeDeps({ maxAttempts: 3, backoff: { initialDelayMs: 1, maxDelayMs: 5 }, infrastructureBackoff: { initialDelayMs: 1, maxDelayMs: 5 }, ...overrides });

describe('an event type without a handler', () => {
  it('dead-letters it by default (HANDLER_NOT_FOUND)', async () => {
    const { d, letters } = deps({});
    expect(await routeOne('outbox.event.order', 0, record, d)).toBe('dead-lettered');
    expect(letters.map((l) => String(l.message.headers?.['x-error-code']))).toEqual(['HANDLER_NOT_FOUND']);
  });

  it("skips and counts it under 'skip'", async () => {
    const { d, letters, events, stats } = deps({ unknownEventType: 'skip' });
    expect(await routeOne('outbox.event.order', 0, record, d)).toBe('skipped');
    expect(stats.skipped).toBe(1);
    expect(events).toContain('router.skipped');
    expect(letters).toEqual([]);
  });

  it("holds the partition under 'block', heartbeating, until the router stops; nothing is dead-lettered or resolved", async () => {
    const stop = new AbortController();
    let beats = 0;
    const { d, letters, events } = deps({
      unknownEventType: 'block',
      signal: stop.signal,
      heartbeat: async () => {
        if (++beats === 3) stop.abort();
      },
    });
    expect(await routeOne('outbox.event.order', 0, record, d)).toBe('aborted');
    expect(beats).toBe(3);
    expect(events).toEqual(['router.blocked', 'router.unblocked']);
    expect(letters).toEqual([]);
  });

  it('takes the per-aggregate-type policy over the default', async () => {
    const skipOrders = deps({ unknownEventType: 'dead-letter', unknownEventTypes: { order: 'skip' } });
    expect(await routeOne('outbox.event.order', 0, record, skipOrders.d)).toBe('skipped');
    const otherType = deps({ unknownEventType: 'skip', unknownEventTypes: { payment: 'dead-letter' } });
    expect(await routeOne('outbox.event.order', 0, record, otherType.d)).toBe('skipped');
    const deadLetterOrders = deps({ unknownEventType: 'skip', unknownEventTypes: { order: 'dead-letter' } });
    expect(await routeOne('outbox.event.order', 0, record, deadLetterOrders.d)).toBe('dead-lettered');
  });
});
