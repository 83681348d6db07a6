import type { KafkaMessage } from 'kafkajs';
import { fakeDeps, routeOne } from './fake-deps';

/** A replayed record names the one consumer it is for (x-replay-consumer): every other router skips it. */
const replayed = (target: string | undefined) =>
  ({
    key: Buffer.from('order-1'),
    value: Buffer.from('{"n":1}'),
    headers: {
      id: '0b7e3c1c-8a63-4c9a-9a51-0d2a8c1f5e77',
      eventType: 'OrderCreated',
      contentType: 'application/json',
      'x-replayed-at': '2026-12-04T00:00:00.000Z',
      ...(target === undefined ? {} : { 'x-replay-consumer': target }),
    },
    offset: '7',
    timestamp: '0',
    attributes: 0,
  }) as KafkaMessage;

describe('a replay for one consumer', () => {
  it('is skipped by a router of another consumer: no handler, no inbox transaction, no dead letter, its offset resolved, counted', async () => {
    let calls = 0;
    const { d, letters, events, stats } = fakeDeps({ consumer: 'shipping', handlers: { order: { OrderCreated: async () => void calls++ } } });
    const connect = jest.spyOn(d.pool, 'connect');
    expect(await routeOne('outbox.event.order', 0, replayed('billing'), d)).toBe('skipped');
    expect(calls).toBe(0);
    expect(connect).not.toHaveBeenCalled();
    expect(letters).toEqual([]);
    expect(stats.skipped).toBe(1);
    expect(events).toContain('router.replay-skipped');
  });

  it('is applied by a router of that consumer, and so is a replay without a target (from an older dlq:replay)', async () => {
    for (const target of ['billing', undefined]) {
      let calls = 0;
      const { d } = fakeDeps({ consumer: 'billing', handlers: { order: { OrderCreated: async () => void calls++ } } });
      expect(await routeOne('outbox.event.order', 0, replayed(target), d)).toBe('applied');
      expect(calls).toBe(1);
    }
  });
});
