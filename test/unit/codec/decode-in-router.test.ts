/**
 * The codec's registry errors as the router sees them (src/router/prepare.ts waits on retriable
 * decode errors and dead-letters the rest): a registry problem must never dead-letter a record.
 * The real codec over the fake registry; the router's pool and DLQ producer are stand-ins.
 */
import type { KafkaMessage } from 'kafkajs';
import { AVRO_CONTENT_TYPE, createCodec, frameConfluent, type ReaderSchemas } from '../../../src/codec';
import { writerSchemaFailure } from '../../../src/codec/registry-errors';
import { orderCreatedJson } from './temp-schemas';

import { fakeDeps, routeOne, type FakeDeps } from '../router/fake-deps';
import { fakeRegistry, type FakeRegistry } from './fake-registry';

const SUBJECT = 'outbox.event.order-dev.outboxrouter.order.OrderCreated';
const order = { orderId: 'o-1', customerId: 'c-7', currency: 'EUR', totalCents: 1999, lines: [], placedAt: new Date('2026-11-30T12:00:00.000Z') };


function route(registry: FakeRegistry, readerSchemas?: ReaderSchemas, overrides: Partial<FakeDeps> = {}) {
  const codec = createCodec({ registry: { url: 'http://unused' }, connection: registry, readerSchemas });
  const applied: unknown[] = [];
  const { d: deps, letters, stats, events } = fakeDeps({ handlers: { order: { OrderCreated: async (event) => void applied.push(event.payload) } }, codec, ...overrides });
  const body = codec.schemas.get('order', 'OrderCreated').type.toBuffer(order);
  const run = (schemaId: number, bytes = body) =>
    routeOne('outbox.event.order', 0, {
      key: Buffer.from('o-1'),
      value: frameConfluent(schemaId, bytes),
      headers: { id: '0b7e3c1c-8a63-4c9a-9a51-0d2a8c1f5e77', eventType: 'OrderCreated', contentType: AVRO_CONTENT_TYPE },
      offset: '0',
      timestamp: '1700000000000',
      attributes: 0,
    } as KafkaMessage, deps);
  return { codec, run, letters, applied, stats, events };
}

/** Runs `fix` just before the registry is asked for the `after`-th time: the registry heals while the router waits. */
function healAfter(registry: FakeRegistry, after: number, fix: () => void): void {
  const writerType = registry.writerType.bind(registry);
  let asked = 0;
  registry.writerType = (id) => {
    if (++asked === after) fix();
    return writerType(id);
  };
}

describe('a registry problem seen by the router', () => {
  it('waits for a schema id the registry does not know yet, then applies the record: no dead letter', async () => {
    const registry = fakeRegistry(41);
    const { codec, run, letters, applied, stats } = route(registry);
    healAfter(registry, 3, () => void registry.register(SUBJECT, codec.schemas.get('order', 'OrderCreated').text));
    expect(await run(41)).toBe('applied');
    expect(letters).toEqual([]);
    expect(applied).toEqual([order]);
    expect(stats).toMatchObject({ deadLettered: 0, infrastructureRetries: 2 });
  });

  it.each([401, 403, 429, 503])('waits while the registry answers HTTP %i, then applies the record: no dead letter', async (status) => {
    const registry = fakeRegistry(41);
    const { codec, run, letters, applied, stats } = route(registry);
    await registry.register(SUBJECT, codec.schemas.get('order', 'OrderCreated').text);
    registry.schemaAnswer = { status, body: { message: 'no' } };
    healAfter(registry, 2, () => (registry.schemaAnswer = undefined));
    expect(await run(41)).toBe('applied');
    expect(letters).toEqual([]);
    expect(applied).toEqual([order]);
    expect(stats.infrastructureRetries).toBe(1);
  });

  it('dead-letters a body that does not fit its (known) schema: that is the record, not the registry', async () => {
    const registry = fakeRegistry(41);
    const { codec, run, letters, stats } = route(registry);
    await registry.register(SUBJECT, codec.schemas.get('order', 'OrderCreated').text);
    expect(await run(41, Buffer.from([0x02]))).toBe('dead-lettered');
    expect(letters[0]?.message.headers).toMatchObject({ 'x-error-code': 'DECODE_FAILED' });
    expect(stats.infrastructureRetries).toBe(0);
  });
});

describe('a schema id the registry does not know, seen by the router (router.unknownSchemaIdWaitMs)', () => {
  /** Waits that end the test's record after `waits` router.wait events (the router would wait on). */
  function waitsCutAfter(waits: number): Partial<FakeDeps> & { errors: string[] } {
    const abort = new AbortController();
    const errors: string[] = [];
    return {
      errors,
      signal: abort.signal,
      unknownSchemaIdWaitMs: 1,
      emit: (name, data) => {
        if (name !== 'router.wait') return;
        errors.push(String(data.error));
        if (errors.length >= waits) abort.abort();
      },
    };
  }

  it('dead-letters a stray id after the wait while the registry still resolves the id it read before: the partition moves on', async () => {
    const registry = fakeRegistry(41);
    // Long enough that the first failed lookup (on a loaded machine: several ms) ends before the limit, so the record waits once.
    const { codec, run, letters, applied, events } = route(registry, undefined, { unknownSchemaIdWaitMs: 250 });
    const known = await registry.register(SUBJECT, codec.schemas.get('order', 'OrderCreated').text);
    expect(await run(known)).toBe('applied');
    registry.calls.length = 0;
    expect(await run(9_999)).toBe('dead-lettered');
    expect(letters).toHaveLength(1);
    expect(letters[0]?.message.headers).toMatchObject({ 'x-error-code': 'SCHEMA_ID_UNKNOWN' });
    expect(String(letters[0]?.message.headers?.['x-error-message'])).toContain(`which still resolves schema id ${known} (asked again just now)`);
    // the live lookup of the id read before, past the codec's caches
    expect(registry.calls).toContain(`schema ${known}`);
    expect(applied).toHaveLength(1);
    expect(events).toContain('router.wait-ended');
  });

  it('counts the wait per id: the next record naming the same stray id is dead-lettered without waiting again', async () => {
    const registry = fakeRegistry(41);
    const { codec, run, letters, stats } = route(registry, undefined, { unknownSchemaIdWaitMs: 5, unknownSchemaIds: new Map() });
    expect(await run(await registry.register(SUBJECT, codec.schemas.get('order', 'OrderCreated').text))).toBe('applied');
    expect(await run(9_999)).toBe('dead-lettered');
    const waited = stats.infrastructureRetries;
    expect(waited).toBeGreaterThan(0);
    expect(await run(9_999)).toBe('dead-lettered');
    expect(stats.infrastructureRetries).toBe(waited);
    expect(letters.map((l) => l.message.headers?.['x-error-code'])).toEqual(['SCHEMA_ID_UNKNOWN', 'SCHEMA_ID_UNKNOWN']);
  });

  it('keeps waiting when no schema id has been read from the registry yet (it may be the wrong registry)', async () => {
    const registry = fakeRegistry(41);
    const cut = waitsCutAfter(6);
    const { run, letters } = route(registry, undefined, cut);
    expect(await run(9_999)).toBe('aborted');
    expect(letters).toEqual([]);
    expect(cut.errors.at(-1)).toContain('Not given up on: no schema id has been read from http://fake-registry/apis/ccompat/v7 yet');
  });

  it('keeps waiting when the id read before is not found either (the registry lost its data, or another registry answers)', async () => {
    const registry = fakeRegistry(41);
    const cut = waitsCutAfter(6);
    const { codec, run, letters } = route(registry, undefined, cut);
    const known = await registry.register(SUBJECT, codec.schemas.get('order', 'OrderCreated').text);
    expect(await run(known)).toBe('applied');
    registry.schemaAnswer = { status: 404, body: { error_code: 40403, message: 'no such id' } };
    expect(await run(9_999)).toBe('aborted');
    expect(letters).toEqual([]);
    expect(cut.errors.at(-1)).toContain(`schema id ${known}, read from http://fake-registry/apis/ccompat/v7 before, is not found there now`);
  });

  it('keeps waiting when the registry fails the lookup of the id read before (an outage)', async () => {
    const registry = fakeRegistry(41);
    const cut = waitsCutAfter(6);
    const { codec, run, letters } = route(registry, undefined, cut);
    const known = await registry.register(SUBJECT, codec.schemas.get('order', 'OrderCreated').text);
    expect(await run(known)).toBe('applied');
    // Unknown ids are unknown; the known one fails with a 503.
    const writerType = registry.writerType.bind(registry);
    registry.writerType = async (id) => {
      if (id === known) throw writerSchemaFailure(registry.url, id, 503, { message: 'down' });
      return writerType(id);
    };
    expect(await run(9_999)).toBe('aborted');
    expect(letters).toEqual([]);
    expect(cut.errors.at(-1)).toContain(`asking http://fake-registry/apis/ccompat/v7 again for schema id ${known}, read before, failed`);
  });

  it('a wait cut short by a rebalance (the heartbeat inside it throws) still ends: no waiting record is left on /readyz and the gauges', async () => {
    const registry = fakeRegistry(41);
    const rebalance = Object.assign(new Error('The group is rebalancing'), { type: 'REBALANCE_IN_PROGRESS' });
    const { run, letters, events } = route(registry, undefined, { heartbeat: async () => Promise.reject(rebalance) });
    await expect(run(9_999)).rejects.toBe(rebalance);
    expect(letters).toEqual([]);
    expect(events.filter((e) => e.startsWith('router.wait'))).toEqual(['router.wait', 'router.wait-ended']);
  });

  it('with unknownSchemaIdWaitMs 0 waits for ever, even while the registry resolves other ids', async () => {
    const registry = fakeRegistry(41);
    const cut = { ...waitsCutAfter(6), unknownSchemaIdWaitMs: 0 };
    const { codec, run, letters } = route(registry, undefined, cut);
    expect(await run(await registry.register(SUBJECT, codec.schemas.get('order', 'OrderCreated').text))).toBe('applied');
    expect(await run(9_999)).toBe('aborted');
    expect(letters).toEqual([]);
    expect(cut.errors).toHaveLength(6);
  });
});

describe('schema evolution seen by the router: records are read with the consumer\'s schema', () => {
  const v1 = orderCreatedJson();

  it('a v1 record reaches a handler on the v2 schema with the added field\'s default, without the removed field', async () => {
    const registry = fakeRegistry(41);
    const v2 = { ...v1, fields: [...v1.fields.filter((f) => f.name !== 'customerId'), { name: 'channel', type: 'string', default: 'web' }] };
    const { codec, run, applied, letters } = route(registry, { order: { OrderCreated: v2 } });
    const id = await registry.register(SUBJECT, codec.schemas.get('order', 'OrderCreated').text);
    expect(await run(id)).toBe('applied');
    expect(letters).toEqual([]);
    const { customerId: _removed, ...kept } = order;
    expect(applied).toEqual([{ ...kept, channel: 'web' }]);
  });

  it('dead-letters with SCHEMA_INCOMPATIBLE when the consumer\'s schema cannot read the writer\'s (no wait, no retry)', async () => {
    const registry = fakeRegistry(41);
    const unreadable = { ...v1, fields: [...v1.fields, { name: 'channel', type: 'string' }] };
    const { codec, run, letters, stats } = route(registry, { order: { OrderCreated: unreadable } });
    const id = await registry.register(SUBJECT, codec.schemas.get('order', 'OrderCreated').text);
    expect(await run(id)).toBe('dead-lettered');
    expect(letters[0]?.message.headers).toMatchObject({ 'x-error-code': 'SCHEMA_INCOMPATIBLE' });
    expect(String(letters[0]?.message.headers?.['x-error-message'])).toContain('readerSchemas.order.OrderCreated');
    expect(stats).toMatchObject({ infrastructureRetries: 0, retries: 0 });
  });
});
