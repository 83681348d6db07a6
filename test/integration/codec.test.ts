import { createServer, type IncomingMessage, type Server } from 'node:http';
import axios from 'axios';
import type { AddressInfo } from 'node:net';
import { AVRO_CONTENT_TYPE, checkSchemas, createCodec, createRegistryConnection, frameConfluent, registerSchemas, type TopicFor } from '../../src/codec';
import { parseAvroType } from '../../src/codec/logical-types';
import { randomName, stackUrls } from '../support/stack-env';
import { orderCreatedJson, tempSchemas } from '../unit/codec/temp-schemas';
import { rejection } from '../support/expect-error';

const registry = { url: stackUrls.registry };
const order = () => ({
  orderId: 'o-1',
  customerId: 'c-7',
  currency: 'EUR',
  totalCents: 1999,
  lines: [{ sku: 'SKU-1', quantity: 2, priceCents: 1000 }],
  placedAt: new Date('2026-11-30T12:00:00.000Z'),
});
/** A topic prefix no other test or run uses, so every subject starts empty. */
const uniqueTopics = (): TopicFor => {
  const prefix = randomName('t');
  return (aggregateType) => `${prefix}.outbox.event.${aggregateType}`;
};


describe('codec against the real registry (Apicurio ccompat)', () => {
  it('registers, encodes and decodes a round trip with a Date, under TopicRecordNameStrategy subjects', async () => {
    const topicFor = uniqueTopics();
    const registered = await registerSchemas({ registry }, { topicFor });
    const created = registered.find((r) => r.eventType === 'OrderCreated');
    expect(created).toMatchObject({ subject: `${topicFor('order')}-dev.outboxrouter.order.OrderCreated`, status: 'registered', version: 1 });
    expect(registered.find((r) => r.eventType === 'OrderCancelled')?.status).toBe('registered');

    const codec = createCodec({ registry, topicFor });
    const bytes = await codec.encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE);
    expect(bytes[0]).toBe(0);
    expect(bytes.readInt32BE(1)).toBe(created?.id);
    const decoded = await createCodec({ registry }).decodeWithInfo(bytes, AVRO_CONTENT_TYPE);
    expect(decoded.payload).toEqual(order());
    expect((decoded.payload as { placedAt: unknown }).placedAt).toBeInstanceOf(Date);
    expect(decoded).toMatchObject({ schemaId: created?.id, schemaName: 'dev.outboxrouter.order.OrderCreated' });

    const again = await registerSchemas({ registry }, { topicFor });
    expect(again.map((r) => r.status)).toEqual(['unchanged', 'unchanged']);
    expect(again.map((r) => r.id)).toEqual(registered.map((r) => r.id));
  });

  it('fails with SCHEMA_NOT_REGISTERED before registration, naming the subject', async () => {
    const topicFor = uniqueTopics();
    const error = await rejection(createCodec({ registry, topicFor }).encode('order', 'OrderCancelled', { orderId: 'o', reason: 'r', cancelledAt: Date.now() }, AVRO_CONTENT_TYPE));
    expect(error.code).toBe('SCHEMA_NOT_REGISTERED');
    expect(error.message).toContain(`${topicFor('order')}-dev.outboxrouter.order.OrderCancelled`);
    expect(error.message).toContain('outbox schemas:register');
  });

  it('registers on first use with autoRegister; a plain codec then finds the same id', async () => {
    const topicFor = uniqueTopics();
    const payload = { orderId: 'o-2', reason: 'changed mind', cancelledAt: new Date('2026-12-01T08:00:00Z') };
    const bytes = await createCodec({ registry, topicFor, autoRegister: true }).encode('order', 'OrderCancelled', payload, AVRO_CONTENT_TYPE);
    const plain = await createCodec({ registry, topicFor }).encode('order', 'OrderCancelled', payload, AVRO_CONTENT_TYPE);
    expect(plain.readInt32BE(1)).toBe(bytes.readInt32BE(1));
    expect(await createCodec({ registry }).decode(plain, AVRO_CONTENT_TYPE)).toEqual(payload);
  });

  it('checkSchemas: new subjects are "new"; an incompatible local schema names the field; the registry refuses it', async () => {
    const topicFor = uniqueTopics();
    const json = orderCreatedJson();
    const v1 = tempSchemas({ 'order/OrderCreated': json });
    const fresh = await checkSchemas({ registry }, { topicFor, schemasDir: v1 });
    expect(fresh).toMatchObject({ ok: true, results: [{ status: 'new', issues: [] }] });
    await registerSchemas({ registry }, { topicFor, schemasDir: v1 });

    const v2 = tempSchemas({ 'order/OrderCreated': { ...json, fields: [...json.fields, { name: 'channel', type: 'string' }] } });
    const report = await checkSchemas({ registry }, { topicFor, schemasDir: v2 });
    expect(report.ok).toBe(false);
    expect(report.results[0]).toMatchObject({ status: 'incompatible', level: 'BACKWARD', registeredVersion: 1, registryCompatible: false });
    expect(report.results[0]?.issues.map((i) => `${i.path}: ${i.problem}`)).toEqual(['OrderCreated.channel: added without a default']);

    const refused = await rejection(registerSchemas({ registry }, { topicFor, schemasDir: v2 }));
    expect(refused.code).toBe('SCHEMA_INCOMPATIBLE');
    expect(refused.message).toContain('OrderCreated.channel: added without a default');

    const v3 = tempSchemas({ 'order/OrderCreated': { ...json, fields: [...json.fields, { name: 'channel', type: 'string', default: 'web' }] } });
    expect((await checkSchemas({ registry }, { topicFor, schemasDir: v3 })).results[0]).toMatchObject({ status: 'compatible', registryCompatible: true });
  });

  it('checkSchemas under FORWARD_TRANSITIVE compares with every registered version, read from the registry', async () => {
    const topicFor = uniqueTopics();
    const json = orderCreatedJson();
    const subject = `${topicFor('order')}-dev.outboxrouter.order.OrderCreated`;
    const register = (schema: unknown) => registerSchemas({ registry }, { topicFor, schemasDir: tempSchemas({ 'order/OrderCreated': schema }) });
    await register(json);
    const set = await axios.put(`${registry.url}/config/${encodeURIComponent(subject)}`, { compatibility: 'FORWARD_TRANSITIVE' }, { headers: { 'Content-Type': 'application/vnd.schemaregistry.v1+json' } });
    expect(set.status).toBe(200);
    // Version 2 adds `channel` as a string, version 3 drops it again and adds an optional `note`.
    await register({ ...json, fields: [...json.fields, { name: 'channel', type: 'string', default: 'web' }] });
    await register({ ...json, fields: [...json.fields, { name: 'note', type: ['null', 'string'], default: null }] });
    const versions = await createRegistryConnection(registry).versions(subject);
    expect(versions.map((v) => v.version)).toEqual([1, 2, 3]);
    expect(JSON.parse(versions[1]!.schema).fields.map((f: { name: string }) => f.name)).toContain('channel');

    // An int `channel` is fine for version 3 alone, not for version 2, which reads it as a string.
    const proposal = tempSchemas({ 'order/OrderCreated': { ...json, fields: [...json.fields, { name: 'channel', type: 'int', default: 0 }] } });
    const result = (await checkSchemas({ registry }, { topicFor, schemasDir: proposal })).results[0];
    expect(result).toMatchObject({ status: 'incompatible', level: 'FORWARD_TRANSITIVE', registeredVersion: 3 });
    expect(result?.issues.map((i) => i.path)).toEqual(['OrderCreated.channel']);
    expect(result?.issues[0]?.problem).toContain('(against version 2)');
  });

  it('decodes garbage, a wrong magic byte and a cut header as DECODE_FAILED (not retriable)', async () => {
    const codec = createCodec({ registry });
    for (const bytes of [Buffer.from('garbage!'), Buffer.from([1, 0, 0, 0, 1, 2]), Buffer.from([0, 0])]) {
      const error = await rejection(codec.decode(bytes, AVRO_CONTENT_TYPE));
      expect([error.code, error.retriable]).toEqual(['DECODE_FAILED', false]);
    }
  });

  it('a schema id the registry does not know yet is retriable SCHEMA_ID_UNKNOWN; once registered, the record decodes (after the short not-found cache)', async () => {
    const connection = createRegistryConnection(registry);
    const uniqueSchema = () => {
      const json = { type: 'record', name: 'Probe', namespace: randomName('ns').replace(/[^A-Za-z0-9_]/g, '_'), fields: [{ name: 'n', type: 'int' }] };
      return { text: JSON.stringify(json), type: parseAvroType(json) };
    };
    const codec = createCodec({ registry, notFoundCacheMs: 200 });
    // Registry ids are handed out in order: frame the record with the id the next new schema will get.
    // Another registration in between takes that id: then start over (bounded).
    for (let round = 1; ; round++) {
      const last = await connection.register(randomName('misc-probe'), uniqueSchema().text);
      const next = uniqueSchema();
      const bytes = frameConfluent(last + 1, next.type.toBuffer({ n: 42 }));
      const unknown = await rejection(codec.decode(bytes, AVRO_CONTENT_TYPE));
      expect([unknown.code, unknown.retriable]).toEqual(['SCHEMA_ID_UNKNOWN', true]);
      expect(unknown.message).toContain(`schema id ${last + 1} is not in the registry at ${stackUrls.registry}`);
      const id = await connection.register(randomName('misc-unknown'), next.text);
      if (id !== last + 1) {
        expect(round).toBeLessThan(5);
        continue;
      }
      const deadline = Date.now() + 15_000;
      for (;;) {
        const outcome = await codec.decode(bytes, AVRO_CONTENT_TYPE).then(
          (payload) => ({ payload }),
          (error: unknown) => ({ error }),
        );
        if ('payload' in outcome) {
          expect(outcome.payload).toEqual({ n: 42 });
          return;
        }
        expect(outcome.error).toMatchObject({ code: 'SCHEMA_ID_UNKNOWN', retriable: true });
        if (Date.now() > deadline) throw new Error(`schema id ${id} was registered but the codec still does not find it`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  });
});

describe('codec when the registry misbehaves', () => {
  let server: Server;
  let requests: IncomingMessage[];
  let answer: (req: IncomingMessage) => [number, unknown] | undefined; // undefined: never answer
  const url = () => `http://127.0.0.1:${(server.address() as AddressInfo).port}/apis/ccompat/v7`;

  beforeAll(async () => {
    server = createServer((req, res) => {
      requests.push(req);
      req.resume();
      req.on('end', () => {
        const reply = answer(req);
        if (reply) res.writeHead(reply[0], { 'content-type': 'application/json' }).end(JSON.stringify(reply[1]));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  beforeEach(() => {
    requests = [];
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('reports a refused connection as retriable REGISTRY_UNAVAILABLE, on encode and decode', async () => {
    const codec = createCodec({ registry: { url: 'http://127.0.0.1:1/apis/ccompat/v7' }, retries: 0 });
    const encoding = await rejection(codec.encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE));
    expect([encoding.code, encoding.retriable]).toEqual(['REGISTRY_UNAVAILABLE', true]);
    expect(encoding.message).toContain('ECONNREFUSED');
    const decoding = await rejection(codec.decode(Buffer.from([0, 0, 0, 0, 5, 2]), AVRO_CONTENT_TYPE));
    expect([decoding.code, decoding.retriable]).toEqual(['REGISTRY_UNAVAILABLE', true]);
  });

  it('retries a 503 and then reports REGISTRY_UNAVAILABLE; a wrong base path is not retried', async () => {
    answer = () => [503, { message: 'overloaded' }];
    const error = await rejection(createCodec({ registry: { url: url() }, retries: 2 }).decode(Buffer.from([0, 0, 0, 0, 5, 2]), AVRO_CONTENT_TYPE));
    expect([error.code, error.retriable]).toEqual(['REGISTRY_UNAVAILABLE', true]);
    expect(requests).toHaveLength(3);

    requests = [];
    answer = () => [404, { title: 'RESTEASY003210: Could not find resource' }];
    const wrongPath = await rejection(createCodec({ registry: { url: url() }, retries: 2 }).decode(Buffer.from([0, 0, 0, 0, 5, 2]), AVRO_CONTENT_TYPE));
    // Retriable for the router (a registry problem, not the record's), but not retried here: seconds will not fix a path.
    expect([wrongPath.code, wrongPath.retriable]).toEqual(['REGISTRY_REQUEST_FAILED', true]);
    expect(requests).toHaveLength(1);
  });

  it.each([
    [401, 'REGISTRY_AUTH_FAILED', 1],
    [403, 'REGISTRY_ACCESS_DENIED', 1],
    [429, 'REGISTRY_UNAVAILABLE', 3],
    [404, 'SCHEMA_ID_UNKNOWN', 1],
  ])('decoding while the registry answers HTTP %i is retriable %s (asked %i times)', async (status, code, asked) => {
    answer = () => [status, status === 404 ? { error_code: 40403, message: 'Schema 5 not found.' } : { message: 'no' }];
    const error = await rejection(createCodec({ registry: { url: url() }, retries: 2 }).decode(Buffer.from([0, 0, 0, 0, 5, 2]), AVRO_CONTENT_TYPE));
    expect([error.code, error.retriable]).toEqual([code, true]);
    expect(requests).toHaveLength(asked);
  });

  it('asks again for an unknown schema id once the not-found cache expires, not before', async () => {
    answer = () => [404, { error_code: 40403, message: 'Schema 5 not found.' }];
    const codec = createCodec({ registry: { url: url() }, notFoundCacheMs: 60_000 });
    const bytes = Buffer.from([0, 0, 0, 0, 5, 2]);
    await rejection(codec.decode(bytes, AVRO_CONTENT_TYPE));
    await rejection(codec.decode(bytes, AVRO_CONTENT_TYPE));
    expect(requests).toHaveLength(1);
    // With no not-found cache, the same codec sees the schema as soon as the registry has it.
    const eager = createCodec({ registry: { url: url() }, notFoundCacheMs: 0 });
    expect((await rejection(eager.decode(bytes, AVRO_CONTENT_TYPE))).code).toBe('SCHEMA_ID_UNKNOWN');
    answer = () => [200, { schema: JSON.stringify({ type: 'record', name: 'R', fields: [{ name: 'n', type: 'int' }] }) }];
    expect(await eager.decode(bytes, AVRO_CONTENT_TYPE)).toEqual({ n: 1 });
    expect(requests).toHaveLength(3);
  });

  it('sends basic auth on every call (lookups and the client\'s registration) and never prints the password', async () => {
    answer = (req) => {
      if (req.method === 'POST' && req.url?.endsWith('/versions')) return [200, { id: 5 }];
      if (req.method === 'PUT') return [200, { compatibility: 'BACKWARD' }];
      return [404, { error_code: 40401, message: 'Subject not found.' }];
    };
    const codec = createCodec({ registry: { url: url(), username: 'bob', password: 'hunter2' }, autoRegister: true, topicFor: uniqueTopics() });
    const bytes = await codec.encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE);
    expect(bytes.readInt32BE(1)).toBe(5);
    expect(requests.map((r) => r.method)).toEqual(expect.arrayContaining(['GET', 'POST', 'PUT']));
    const expected = `Basic ${Buffer.from('bob:hunter2').toString('base64')}`;
    expect(requests.map((r) => r.headers.authorization)).toEqual(requests.map(() => expected));

    answer = () => [401, { message: 'Unauthorized' }];
    const denied = await rejection(createCodec({ registry: { url: url(), username: 'bob', password: 'hunter2' } }).encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE));
    expect([denied.code, denied.retriable]).toEqual(['REGISTRY_AUTH_FAILED', true]);
    expect(`${denied.message} ${JSON.stringify(denied.details)}`).not.toContain('hunter2');
  });

  it('times out a registry that accepts the connection but never answers, also inside the client\'s registration', async () => {
    answer = (req) => (req.method === 'GET' ? [404, { error_code: 40401, message: 'Subject not found.' }] : undefined);
    const started = Date.now();
    const codec = createCodec({ registry: { url: url() }, autoRegister: true, timeoutMs: 300, retries: 0, topicFor: uniqueTopics() });
    const error = await rejection(codec.encode('order', 'OrderCreated', order(), AVRO_CONTENT_TYPE));
    expect([error.code, error.retriable]).toEqual(['REGISTRY_UNAVAILABLE', true]);
    expect(requests.some((r) => r.method === 'POST')).toBe(true);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
