import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { AVRO_CONTENT_TYPE, createCodec, JSON_CONTENT_TYPE, registerSchemas } from '../../src/codec';
import type { RoutedEvent } from '../../src/router';
import { routerHarness } from '../support/router-scenario';
import { PROJECT_ROOT } from '../../scripts/stack/paths';
import { tempSchemas } from '../unit/codec/temp-schemas';

jest.setTimeout(120_000);

/**
 * Schema evolution on the real registry and router (docs/schemas.md): events written with v1 of a
 * schema reach a consumer deployed with a compatible v2 as v2 (Avro schema resolution), and JSON
 * payloads are checked against the zod schema of the version their `schemaVersion` header names.
 */
describe('router: schema evolution', () => {
  const h = routerHarness('router_evolution');
  const v1 = JSON.parse(readFileSync(join(PROJECT_ROOT, 'schemas', 'order', 'OrderCancelled.avsc'), 'utf8')) as { fields: Array<{ name: string }> } & Record<string, unknown>;
  // v2: `channel` added with a default, `reason` removed. Compatible under BACKWARD (the registry's default).
  const v2 = { ...v1, fields: [...v1.fields.filter((f) => f.name !== 'reason'), { name: 'channel', type: 'string', default: 'web' }] };

  it('a v2 consumer reads v1 events with the new field\'s default and without the removed field', async () => {
    const s = await h.scenario(1);
    // v1 is registered under the scenario's own subject by its first write (autoRegister).
    const v1Records = await h.produce(s, [{ key: 'o-1', reason: 'too late' }, { key: 'o-2', reason: 'duplicate' }]);

    const v2Dir = tempSchemas({ 'order/OrderCancelled': v2 });
    const [registered] = await registerSchemas(h.config, { schemasDir: v2Dir, topicFor: () => s.topic });
    expect(registered).toMatchObject({ subject: `${s.topic}-dev.outboxrouter.order.OrderCancelled`, status: 'registered', version: 2 });
    // A producer already on v2 writes one more.
    const v2Codec = createCodec({ registry: h.config.registry, schemasDir: v2Dir, topicFor: () => s.topic });
    const v2Value = await v2Codec.encode('order', 'OrderCancelled', { orderId: 'o-3', cancelledAt: new Date(), channel: 'app' }, AVRO_CONTENT_TYPE);
    await h.produce(s, [{ key: 'o-3', value: v2Value }]);

    const seen: RoutedEvent[] = [];
    await h.startRouter(s, { order: { OrderCancelled: async (event) => void seen.push(event) } }, { schemasDir: v2Dir });
    await h.until('three events handled', () => seen.length === 3);
    const payloads = seen.map((e) => e.payload as Record<string, unknown>);
    expect(seen.map((e) => e.id).slice(0, 2)).toEqual(v1Records.map((r) => r.id));
    expect(payloads.map((p) => [p.orderId, p.channel])).toEqual([
      ['o-1', 'web'],
      ['o-2', 'web'],
      ['o-3', 'app'],
    ]);
    for (const p of payloads) expect(p).not.toHaveProperty('reason');
  });

  it('a consumer without a reader schema for the event type keeps reading with the writer\'s schema', async () => {
    const s = await h.scenario(1);
    await h.produce(s, [{ key: 'o-1', reason: 'kept' }]);
    const seen: unknown[] = [];
    // A schemas folder with nothing for order/OrderCancelled.
    const empty = tempSchemas({});
    await h.startRouter(s, { order: { OrderCancelled: async (event) => void seen.push(event.payload) } }, { schemasDir: empty });
    await h.until('one event handled', () => seen.length === 1);
    expect(seen[0]).toMatchObject({ orderId: 'o-1', reason: 'kept' });
  });

  it('checks JSON payloads against the zod schema of the version their schemaVersion header names', async () => {
    const s = await h.scenario(1);
    const json = (key: string, payload: unknown, version?: string) => ({
      key,
      value: Buffer.from(JSON.stringify(payload)),
      headers: { id: randomUUID(), eventType: 'OrderCancelled', contentType: JSON_CONTENT_TYPE, headers: JSON.stringify(version ? { schemaVersion: version } : {}) },
    });
    await h.produce(s, [json('o-1', { orderId: 'o-1', reason: 'old' }), json('o-2', { orderId: 'o-2' }, '2'), json('o-3', { orderId: 'o-3' })]);
    const seen: unknown[] = [];
    const versions = { 1: z.object({ orderId: z.string(), reason: z.string() }), 2: z.object({ orderId: z.string(), channel: z.string().default('web') }) };
    await h.startRouter(s, { order: { OrderCancelled: async (event) => void seen.push(event.payload) } }, { payloadSchemas: { order: { OrderCancelled: { versions } } } });
    await h.until('two events handled', () => seen.length === 2);
    expect(seen).toEqual([{ orderId: 'o-1', reason: 'old' }, { orderId: 'o-2', channel: 'web' }]);
    // o-3 has no version, so version 1 applies, which needs a reason: dead-lettered.
    await h.until('o-3 dead-lettered', () => h.routers[0]!.stats().deadLettered === 1);
  });
});
