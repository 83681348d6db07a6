import type { KafkaMessage } from 'kafkajs';
import type { RoutedEvent } from '../../../src/router';
import { fakeDeps, routeOne } from './fake-deps';

/** A stock Debezium outbox's record through the router's real entry point, read with router.envelope. */
const message = (headers: Record<string, string>, value: unknown): KafkaMessage =>
  ({ key: Buffer.from('order-1'), value: Buffer.from(JSON.stringify(value)), headers, offset: '3', timestamp: '0', attributes: 0 }) as KafkaMessage;
const UUID = '0b7e3c1c-8a63-4c9a-9a51-0d2a8c1f5e77';

describe('router.envelope on the record\'s way', () => {
  it('finds the handler by the event type in a value field (type:envelope:eventType) and hands it the payload alone', async () => {
    const seen: RoutedEvent[] = [];
    const { d } = fakeDeps({
      envelope: { idHeader: 'id', eventTypeHeader: 'eventType', eventTypeField: 'eventType', valueFormat: 'json' },
      handlers: { order: { OrderCreated: async (event: RoutedEvent) => void seen.push(event) } },
    });
    const record = message({ id: UUID }, { eventType: 'OrderCreated', payload: JSON.stringify({ orderId: 7 }) });
    expect(await routeOne('outbox.event.order', 0, record, d)).toBe('applied');
    expect(seen).toMatchObject([{ id: UUID, type: 'OrderCreated', aggregateId: 'order-1', payload: { orderId: 7 } }]);
  });

  it('applies a JSON record without contentType under defaultContentType, and dead-letters it without (RECORD_INVALID)', async () => {
    const record = message({ id: UUID, eventType: 'OrderCreated' }, { orderId: 7 });
    const withDefault = fakeDeps({ envelope: { idHeader: 'id', eventTypeHeader: 'eventType', valueFormat: 'bytes', defaultContentType: 'application/json' } });
    expect(await routeOne('outbox.event.order', 0, record, withDefault.d)).toBe('applied');
    const without = fakeDeps({});
    expect(await routeOne('outbox.event.order', 0, record, without.d)).toBe('dead-lettered');
    expect(String(without.letters[0]?.message.headers?.['x-error-code'])).toBe('RECORD_INVALID');
  });

  it('dead-letters a bigint id while the inbox is still on uuid ids, naming migration 013', async () => {
    // The fake pool answers the column-type query with no row: an inbox as migration 002 made it.
    const { d, letters } = fakeDeps({ envelope: { idHeader: 'id', eventTypeHeader: 'eventType', valueFormat: 'json' } });
    expect(await routeOne('outbox.event.order', 0, message({ id: '1000000000001', eventType: 'OrderCreated' }, { orderId: 7 }), d)).toBe('dead-lettered');
    expect(String(letters[0]?.message.headers?.['x-error-code'])).toBe('RECORD_INVALID');
    expect(String(letters[0]?.message.headers?.['x-error-message'])).toMatch(/not a UUID.*013_inbox_text_ids/);
  });
});
