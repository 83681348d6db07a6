/** src/codec/create-codec.ts against an in-memory registry: framing, ids, caching, decoding. */
import { AVRO_CONTENT_TYPE, createCodec, frameConfluent, JSON_CONTENT_TYPE, unframeConfluent, type ReaderSchemas } from '../../../src/codec';
import type { PayloadEncoder } from '../../../src/producer';
import { fakeRegistry, type FakeRegistry } from './fake-registry';
import { orderCreatedJson, tempSchemas } from './temp-schemas';
import { rejection } from '../../support/expect-error';

const SUBJECT = 'outbox.event.order-dev.outboxrouter.order.OrderCreated';
const order = () => ({
  orderId: 'o-1',
  customerId: 'c-7',
  currency: 'EUR',
  totalCents: 1999,
  lines: [{ sku: 'SKU-1', quantity: 2, priceCents: 1000 }],
  placedAt: new Date('2026-11-30T12:00:00.000Z'),
});


describe('codec (fake registry)', () => {
  let registry: FakeRegistry;
  const codec = (extra: { autoRegister?: boolean; schemasDir?: string; readerSchemas?: ReaderSchemas } = {}) => createCodec({ registry: { url: 'http://unused' }, connection: registry, ...extra });

  beforeEach(() => {
    registry = fakeRegistry(41);
  });

  it('encodes Avro as 0x00 + the registered id + the body, and decodes it back with a Date', async () => {
    const c = codec();
    const id = await registry.register(SUBJECT, c.schemas.get('order', 'OrderCreated').text);
    const bytes = await c.encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE);
    expect(bytes[0]).toBe(0);
    expect(bytes.readInt32BE(1)).toBe(id);
    expect(unframeConfluent(bytes).body).toEqual(c.schemas.get('order', 'OrderCreated').type.toBuffer(order()));
    const decoded = await c.decodeWithInfo(bytes, AVRO_CONTENT_TYPE);
    expect(decoded).toEqual({ payload: order(), contentType: AVRO_CONTENT_TYPE, schemaId: id, schemaName: 'dev.outboxrouter.order.OrderCreated' });
    expect((decoded.payload as { placedAt: unknown }).placedAt).toBeInstanceOf(Date);
  });

  it('is what the outbox writer expects of a codec', async () => {
    const encoder: PayloadEncoder = codec({ autoRegister: true }); // a compile-time check as much as a runtime one
    const bytes = await encoder.encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE);
    expect(bytes.readInt32BE(1)).toBe(41);
  });

  it('looks the id up once per subject, then serves it from the cache', async () => {
    const c = codec();
    await registry.register(SUBJECT, c.schemas.get('order', 'OrderCreated').text);
    registry.calls.length = 0;
    await Promise.all([1, 2, 3].map(() => c.encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE)));
    await c.encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE);
    expect(registry.calls).toEqual([`lookup ${SUBJECT}`]);
  });

  it('fails with SCHEMA_NOT_REGISTERED naming the subject and the command, and asks again next time', async () => {
    const c = codec();
    const error = await rejection(c.encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE));
    expect(error.code).toBe('SCHEMA_NOT_REGISTERED');
    expect(error.retriable).toBe(false);
    expect(error.message).toContain(`under subject ${SUBJECT}`);
    expect(error.message).toContain('outbox schemas:register');
    await registry.register(SUBJECT, c.schemas.get('order', 'OrderCreated').text);
    await expect(c.encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE)).resolves.toBeInstanceOf(Buffer);
  });

  it('registers on first use with autoRegister', async () => {
    const bytes = await codec({ autoRegister: true }).encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE);
    expect(registry.calls).toEqual([`register ${SUBJECT}`]);
    expect(registry.subjects.get(SUBJECT)?.[0]?.id).toBe(bytes.readInt32BE(1));
  });

  it('validates before it talks to the registry', async () => {
    const error = await rejection(codec({ autoRegister: true }).encode('order', 'OrderCreated', { ...order(), totalCents: 'lots' }, AVRO_CONTENT_TYPE));
    expect(error.code).toBe('PAYLOAD_INVALID');
    expect(error.message).toContain('totalCents: got string "lots", expected long');
    expect(registry.calls).toEqual([]);
  });

  it('rejects an unknown event type and an unknown content type', async () => {
    expect((await rejection(codec().encode('order', 'OrderLost', {}, AVRO_CONTENT_TYPE))).code).toBe('EVENT_TYPE_UNKNOWN');
    const error = await rejection(codec().encode('order', 'OrderCreated', order(), 'text/plain' as never));
    expect(error.code).toBe('PAYLOAD_INVALID');
    expect(error.message).toContain('application/vnd.apache.avro+binary or application/json');
  });

  it('encodes and decodes JSON without schemas or registry, accepting content-type parameters', async () => {
    const c = codec({ schemasDir: '/nonexistent' });
    const bytes = await c.encode('invoice', 'InvoiceSent', { n: 1 }, JSON_CONTENT_TYPE);
    expect(await c.decode(bytes, 'Application/JSON; charset=utf-8')).toEqual({ n: 1 });
    expect(registry.calls).toEqual([]);
  });

  it('fails decoding with DECODE_FAILED for a truncated body and an unknown content type: the record itself is bad', async () => {
    const c = codec({ autoRegister: true });
    const bytes = await c.encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE);
    const e2 = await rejection(c.decode(bytes.subarray(0, bytes.length - 3), AVRO_CONTENT_TYPE));
    expect([e2.code, e2.retriable]).toEqual(['DECODE_FAILED', false]);
    expect(e2.message).toMatch(/body does not match schema id 41 \(dev\.outboxrouter\.order\.OrderCreated\)/);
    const e3 = await rejection(c.decode(bytes, 'application/x-protobuf'));
    expect([e3.code, e3.retriable]).toEqual(['DECODE_FAILED', false]);
    expect(e3.message).toContain('"application/x-protobuf"');
    const e4 = await rejection(c.decode(Buffer.from(JSON.stringify(order())), AVRO_CONTENT_TYPE));
    expect([e4.code, e4.retriable]).toEqual(['DECODE_FAILED', false]);
    expect(e4.message).toContain('not the magic byte');
  });

  it('an unknown schema id is retriable SCHEMA_ID_UNKNOWN (not a bad record), and decodes once the schema is registered', async () => {
    const c = codec();
    const text = c.schemas.get('order', 'OrderCreated').text;
    // Framed with the id the registry will give the schema: as a record read from a replica that lags.
    const bytes = frameConfluent(41, c.schemas.get('order', 'OrderCreated').type.toBuffer(order()));
    const unknown = await rejection(c.decode(bytes, AVRO_CONTENT_TYPE));
    expect([unknown.code, unknown.retriable]).toEqual(['SCHEMA_ID_UNKNOWN', true]);
    expect(unknown.message).toContain('schema id 41 is not in the registry at http://fake-registry');
    expect(await registry.register(SUBJECT, text)).toBe(41);
    expect(await c.decode(bytes, AVRO_CONTENT_TYPE)).toEqual(order());
  });

  it.each([
    [401, { message: 'Unauthorized' }, 'REGISTRY_AUTH_FAILED', /refused the credentials .*HTTP 401.*OUTBOX_REGISTRY_USERNAME/],
    [403, { message: 'Forbidden' }, 'REGISTRY_ACCESS_DENIED', /HTTP 403.*Grant that user the access it needs/],
    [429, { message: 'Too many requests' }, 'REGISTRY_UNAVAILABLE', /HTTP 429 \(rate limited\)/],
    [503, { message: 'busy' }, 'REGISTRY_UNAVAILABLE', /HTTP 503 \(busy\)/],
    [404, { title: 'RESTEASY003210: Could not find resource' }, 'REGISTRY_REQUEST_FAILED', /does not look like a Confluent-compatible API/],
    [400, { message: 'bad request', error_code: 40001 }, 'REGISTRY_REQUEST_FAILED', /rejected GET \/schemas\/ids\/41.*HTTP 400/],
  ])('a registry answering HTTP %i to a decode is retriable %s: the router waits, nothing is dead-lettered', async (status, body, code, message) => {
    const c = codec({ autoRegister: true });
    const bytes = await c.encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE);
    registry.schemaAnswer = { status, body };
    const error = await rejection(c.decode(bytes, AVRO_CONTENT_TYPE));
    expect([error.code, error.retriable]).toEqual([code, true]);
    expect(error.message).toMatch(message);
    registry.schemaAnswer = undefined;
    expect(await c.decode(bytes, AVRO_CONTENT_TYPE)).toEqual(order());
  });

  it('a 404 "schema not found" (error_code 40403) is the unknown id: retriable SCHEMA_ID_UNKNOWN', async () => {
    const c = codec({ autoRegister: true });
    const bytes = await c.encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE);
    registry.schemaAnswer = { status: 404, body: { error_code: 40403, message: 'Schema 41 not found.' } };
    const error = await rejection(c.decode(bytes, AVRO_CONTENT_TYPE));
    expect([error.code, error.retriable]).toEqual(['SCHEMA_ID_UNKNOWN', true]);
  });

  it('reads an old record with a newer local schema, filling defaults (reader option)', async () => {
    const json = orderCreatedJson();
    const newer = { ...json, fields: [...json.fields, { name: 'channel', type: 'string', default: 'web' }] };
    const old = codec({ autoRegister: true });
    const bytes = await old.encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE);
    const reader = codec({ schemasDir: tempSchemas({ 'order/OrderCreated': newer }) });
    const withDefault = (await reader.decode(bytes, AVRO_CONTENT_TYPE, { reader: { aggregateType: 'order', eventType: 'OrderCreated' } })) as Record<string, unknown>;
    expect(withDefault.channel).toBe('web');
    expect(withDefault.placedAt).toEqual(order().placedAt);
    expect(((await reader.decode(bytes, AVRO_CONTENT_TYPE)) as Record<string, unknown>).channel).toBeUndefined();
  });

  it('refuses to read with an incompatible local schema', async () => {
    const json = orderCreatedJson();
    const bytes = await codec({ autoRegister: true }).encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE);
    const reader = codec({ schemasDir: tempSchemas({ 'order/OrderCreated': { ...json, fields: [...json.fields, { name: 'channel', type: 'string' }] } }) });
    const error = await rejection(reader.decode(bytes, AVRO_CONTENT_TYPE, { reader: { aggregateType: 'order', eventType: 'OrderCreated' } }));
    expect([error.code, error.retriable]).toEqual(['SCHEMA_INCOMPATIBLE', false]);
    // Both schemas and the way out.
    expect(error.message).toContain('schema id 41 (dev.outboxrouter.order.OrderCreated) cannot be read with the reader schema');
    expect(error.message).toContain('OrderCreated.avsc');
    expect(error.message).toContain('outbox dlq:replay');
  });

  const asReader = { reader: { aggregateType: 'order', eventType: 'OrderCreated' } };

  it('drops a field the reader schema removed, and keeps the rest', async () => {
    const json = orderCreatedJson();
    const bytes = await codec({ autoRegister: true }).encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE);
    const withoutCustomer = { ...json, fields: json.fields.filter((f) => f.name !== 'customerId') };
    const read = (await codec({ schemasDir: tempSchemas({ 'order/OrderCreated': withoutCustomer }) }).decode(bytes, AVRO_CONTENT_TYPE, asReader)) as Record<string, unknown>;
    expect(read).not.toHaveProperty('customerId');
    const { customerId: _dropped, ...rest } = order();
    expect(read).toEqual(rest);
  });

  it('reads with the writer schema when the reader has no schema for the event type', async () => {
    const bytes = await codec({ autoRegister: true }).encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE);
    const none = codec({ schemasDir: tempSchemas({ 'order/OrderCancelled': JSON.parse(JSON.stringify(codec().schemas.get('order', 'OrderCancelled').type.schema())) }) });
    expect(await none.decode(bytes, AVRO_CONTENT_TYPE, asReader)).toEqual(order());
  });

  it('readerSchemas (e.g. a handlers module\'s `schemas` export) take precedence over the schemas folder', async () => {
    const json = orderCreatedJson();
    const bytes = await codec({ autoRegister: true }).encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE);
    const v2 = { ...json, fields: [...json.fields, { name: 'channel', type: 'string', default: 'shop' }] };
    const fromMap = codec({ readerSchemas: { order: { OrderCreated: v2 } } });
    expect(await fromMap.decode(bytes, AVRO_CONTENT_TYPE, asReader)).toEqual({ ...order(), channel: 'shop' });
    // The schema's text works too.
    const fromText = codec({ readerSchemas: { order: { OrderCreated: JSON.stringify(v2) } } });
    expect(await fromText.decode(bytes, AVRO_CONTENT_TYPE, asReader)).toEqual({ ...order(), channel: 'shop' });
  });

  it('refuses a reader schema that is not an Avro record when the codec is created, naming where it is declared', () => {
    expect(() => codec({ readerSchemas: { order: { OrderCreated: { type: 'record', name: 'X', fields: [{ name: 'a', type: 'nope' }] } } } })).toThrow(/readerSchemas\.order\.OrderCreated is not a valid Avro schema/);
    expect(() => codec({ readerSchemas: { order: { OrderCreated: 'string' } } })).toThrow(/readerSchemas\.order\.OrderCreated/);
  });
});
