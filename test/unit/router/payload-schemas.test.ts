/** src/router/prepare.ts: a JSON payload checked against its zod schema, or against the version its `schemaVersion` header names. */
import type { KafkaMessage } from 'kafkajs';
import { z } from 'zod';
import type { PayloadSchemas } from '../../../src/router';
import { fakeDeps, routeOne } from './fake-deps';

const ID = '0b7e3c1c-8a63-4c9a-9a51-0d2a8c1f5e77';

function message(payload: unknown, extra?: Record<string, string>): KafkaMessage {
  const headers: Record<string, string> = { id: ID, eventType: 'OrderCreated', contentType: 'application/json' };
  if (extra) headers.headers = JSON.stringify(extra);
  return { key: Buffer.from('order-1'), value: Buffer.from(JSON.stringify(payload)), headers, offset: '0', timestamp: '1700000000000', attributes: 0 } as KafkaMessage;
}

function route(payloadSchemas: PayloadSchemas, record: KafkaMessage) {
  const seen: unknown[] = [];
  const { d, letters } = fakeDeps({ handlers: { order: { OrderCreated: async (event) => void seen.push(event.payload) } }, payloadSchemas });
  return { outcome: routeOne('outbox.event.order', 0, record, d), seen, letters };
}

const versioned: PayloadSchemas = {
  order: {
    OrderCreated: {
      versions: {
        1: z.object({ orderId: z.string() }),
        2: z.object({ orderId: z.string(), channel: z.string().default('web') }),
      },
    },
  },
};

describe('payloadSchemas', () => {
  it('a single zod schema applies to every payload (and its defaults reach the handler)', async () => {
    const r = route({ order: { OrderCreated: z.object({ orderId: z.string(), channel: z.string().default('web') }) } }, message({ orderId: 'o-1' }));
    expect(await r.outcome).toBe('applied');
    expect(r.seen).toEqual([{ orderId: 'o-1', channel: 'web' }]);
  });

  it('per version: the schemaVersion header picks the schema', async () => {
    const r = route(versioned, message({ orderId: 'o-1' }, { schemaVersion: '2' }));
    expect(await r.outcome).toBe('applied');
    expect(r.seen).toEqual([{ orderId: 'o-1', channel: 'web' }]);
  });

  it('per version: a payload without the header is checked against the lowest version', async () => {
    const r = route(versioned, message({ orderId: 'o-1', channel: 'app' }));
    expect(await r.outcome).toBe('applied');
    // Version 1 has no channel: zod's object strips it.
    expect(r.seen).toEqual([{ orderId: 'o-1' }]);
  });

  it('per version: a payload failing its version is dead-lettered naming the version', async () => {
    const r = route(versioned, message({ order: 'o-1' }, { schemaVersion: '2' }));
    expect(await r.outcome).toBe('dead-lettered');
    expect(r.letters[0]?.message.headers).toMatchObject({ 'x-error-code': 'PAYLOAD_INVALID' });
    expect(String(r.letters[0]?.message.headers?.['x-error-message'])).toContain('order.OrderCreated (schema version 2) payload fails its schema');
  });

  it('per version: a version the consumer does not know is dead-lettered, naming the versions it has', async () => {
    const r = route(versioned, message({ orderId: 'o-1' }, { schemaVersion: '3' }));
    expect(await r.outcome).toBe('dead-lettered');
    expect(r.letters[0]?.message.headers).toMatchObject({ 'x-error-code': 'PAYLOAD_INVALID' });
    expect(String(r.letters[0]?.message.headers?.['x-error-message'])).toContain('schemaVersion "3", but payloadSchemas.order.OrderCreated.versions has 1, 2');
  });
});
