/**
 * src/producer/writer.ts with a fake pg client (a `query` jest.fn and `getTransactionStatus`) and a
 * fake encoder: the SQL and parameters the writer issues, and what it refuses before issuing any.
 */
import type { ClientBase } from 'pg';
import { loadConfig, type OutboxOptions } from '../../../src/config';
import { createOutboxWriter, type OutboxEvent, type OutboxWriterOptions, type PayloadEncoder } from '../../../src/producer';
import { rejection } from '../../support/expect-error';

// Generated ids are UUIDv7 (time-ordered, see src/producer/uuidv7.ts).
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const AVRO = 'application/vnd.apache.avro+binary';

function fakeClient(status: string | null = 'T') {
  const query = jest.fn(async (_text: string, _values?: unknown[]) => ({ rows: [], rowCount: 0 }));
  const getTransactionStatus = jest.fn(() => status);
  return { query, getTransactionStatus, asClient: { query, getTransactionStatus } as unknown as ClientBase };
}

function fakeEncoder(bytes: (payload: unknown) => Buffer = (p) => Buffer.from(JSON.stringify(p))) {
  const encode = jest.fn(async (_aggregateType: string, _eventType: string, payload: unknown, _contentType: string) => bytes(payload));
  return { encode, codec: { encode } as PayloadEncoder };
}

function writer(outbox: OutboxOptions['outbox'] = {}, options: Partial<OutboxWriterOptions> = {}, codec: PayloadEncoder = fakeEncoder().codec) {
  return createOutboxWriter({ outbox: loadConfig({ env: {}, overrides: { outbox } }).outbox, codec, ...options });
}

const event = (n = 0, patch: Partial<OutboxEvent> = {}): OutboxEvent => ({
  aggregateType: 'order',
  aggregateId: `order-${n}`,
  type: 'OrderCreated',
  payload: { n },
  ...patch,
});


describe('transaction status', () => {
  it("'I' (idle, no transaction) is NOT_IN_TRANSACTION; nothing is encoded or queried", async () => {
    const client = fakeClient('I');
    const encoder = fakeEncoder();
    const error = await rejection(writer({}, {}, encoder.codec).writeEvent(client.asClient, event()));
    expect(error.code).toBe('NOT_IN_TRANSACTION');
    expect(error.message).toContain('BEGIN');
    expect(client.query).not.toHaveBeenCalled();
    expect(encoder.encode).not.toHaveBeenCalled();
  });

  it("'E' (failed transaction) is NOT_IN_TRANSACTION telling to ROLLBACK; nothing is queried", async () => {
    const client = fakeClient('E');
    const error = await rejection(writer().writeEvents(client.asClient, [event(1), event(2)]));
    expect(error.code).toBe('NOT_IN_TRANSACTION');
    expect(error.message).toContain('ROLLBACK');
    expect(client.query).not.toHaveBeenCalled();
  });

  it('an empty batch outside a transaction is still refused', async () => {
    const client = fakeClient('I');
    expect((await rejection(writer().writeEvents(client.asClient, []))).code).toBe('NOT_IN_TRANSACTION');
  });

  it('an empty batch in a transaction writes nothing and returns []', async () => {
    const client = fakeClient('T');
    await expect(writer().writeEvents(client.asClient, [])).resolves.toEqual([]);
    expect(client.query).not.toHaveBeenCalled();
  });
});

describe("inside a transaction ('T')", () => {
  it('writes schemaVersion into the headers column, beside the event\'s own headers', async () => {
    const client = fakeClient('T');
    const encoder = fakeEncoder(() => Buffer.from([1]));
    const w = writer({}, {}, encoder.codec);
    await w.writeEvent(client.asClient, { ...event(1, { headers: { tenant: 'acme' } }), schemaVersion: 2 });
    await w.writeEvent(client.asClient, { ...event(2), schemaVersion: '3' });
    const headersOf = (call: number) => JSON.parse((client.query.mock.calls[call] as [string, unknown[]])[1][7] as string);
    expect(headersOf(0)).toEqual({ tenant: 'acme', schemaVersion: '2' });
    expect(headersOf(1)).toEqual({ schemaVersion: '3' });
    await expect(w.writeEvent(client.asClient, { ...event(3), schemaVersion: 0 })).rejects.toMatchObject({ code: 'EVENT_INVALID' });
  });

  it('issues one INSERT of 8 parameters into the escaped table, with the encoded payload', async () => {
    const client = fakeClient('T');
    const encoder = fakeEncoder(() => Buffer.from([1, 2, 3]));
    const w = writer({ schema: 'my"schema', table: 'out"box; DROP' }, {}, encoder.codec);
    const written = await w.writeEvent(client.asClient, event(7, { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', headers: { tenant: 'acme', 'x-n': '1' } }));

    expect(client.query).toHaveBeenCalledTimes(1);
    const [sql, params] = client.query.mock.calls[0] as [string, unknown[]];
    expect(sql).toBe(
      'INSERT INTO "my""schema"."out""box; DROP" (id, aggregate_type, aggregate_id, event_type, payload, content_type, traceparent, headers) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
    );
    expect(params).toHaveLength(8);
    const [id, aggregateType, aggregateId, type, payload, contentType, traceparent, headers] = params;
    expect(id).toMatch(UUID);
    expect([aggregateType, aggregateId, type]).toEqual(['order', 'order-7', 'OrderCreated']);
    expect(Buffer.isBuffer(payload) && (payload as Buffer).equals(Buffer.from([1, 2, 3]))).toBe(true);
    expect(contentType).toBe(AVRO);
    expect(traceparent).toBe('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
    expect(typeof headers).toBe('string');
    expect(JSON.parse(headers as string)).toEqual({ tenant: 'acme', 'x-n': '1' });

    expect(encoder.encode).toHaveBeenCalledWith('order', 'OrderCreated', { n: 7 }, AVRO);
    expect(written).toEqual({ id, aggregateType: 'order', aggregateId: 'order-7', type: 'OrderCreated', contentType: AVRO, bytes: 3 });
  });

  it('passes null for an absent traceparent and headers', async () => {
    const client = fakeClient('T');
    await writer().writeEvent(client.asClient, event());
    const params = client.query.mock.calls[0]?.[1] as unknown[];
    expect(params[6]).toBeNull();
    expect(params[7]).toBeNull();
  });

  it('keeps a given id, and generates distinct uuids otherwise', async () => {
    const client = fakeClient('T');
    const given = '3f2b8c1e-9a4d-4e6b-8f1a-2c3d4e5f6a7b';
    const written = await writer().writeEvents(client.asClient, [event(1, { id: given }), event(2), event(3)]);
    expect(written[0]?.id).toBe(given);
    expect(written[1]?.id).toMatch(UUID);
    expect(written[2]?.id).toMatch(UUID);
    expect(written[1]?.id).not.toBe(written[2]?.id);
    const params = client.query.mock.calls[0]?.[1] as unknown[];
    expect([params[0], params[8], params[16]]).toEqual(written.map((w) => w.id));
  });

  it("cleanupMode 'partition': a given id that is not a UUIDv7 is EVENT_INVALID naming it; nothing is queried", async () => {
    const client = fakeClient('T');
    const given = '3f2b8c1e-9a4d-4e6b-8f1a-2c3d4e5f6a7b';
    const error = await rejection(writer({ cleanupMode: 'partition' }).writeEvent(client.asClient, event(1, { id: given })));
    expect(error.code).toBe('EVENT_INVALID');
    expect(error.message).toContain(given);
    expect(error.message).toContain('UUIDv7');
    expect(client.query).not.toHaveBeenCalled();
    const v7 = '01a24cb1-07c0-7abc-8def-0123456789ab';
    const written = await writer({ cleanupMode: 'partition' }).writeEvents(client.asClient, [event(2, { id: v7 }), event(3)]);
    expect(written[0]?.id).toBe(v7);
    expect(written[1]?.id).toMatch(UUID);
  });

  it('content type: the event’s own wins over the writer default, which wins over Avro', async () => {
    const client = fakeClient('T');
    const encoder = fakeEncoder();
    const w = writer({}, { contentType: 'application/json' }, encoder.codec);
    await w.writeEvents(client.asClient, [event(1), event(2, { contentType: AVRO })]);
    expect(encoder.encode.mock.calls.map((c) => c[3])).toEqual(['application/json', AVRO]);
    const params = client.query.mock.calls[0]?.[1] as unknown[];
    expect([params[5], params[13]]).toEqual(['application/json', AVRO]);
  });

  it('an encoded payload over maxPayloadBytes is PAYLOAD_TOO_LARGE naming bytes and limit; nothing is queried', async () => {
    const client = fakeClient('T');
    const w = writer({ maxPayloadBytes: 100 }, {}, fakeEncoder(() => Buffer.alloc(101)).codec);
    const error = await rejection(w.writeEvent(client.asClient, event()));
    expect(error.code).toBe('PAYLOAD_TOO_LARGE');
    expect(error.message).toContain('101 bytes');
    expect(error.message).toContain('limit is 100');
    expect(error.details).toEqual({ bytes: 101, limit: 100 });
    expect(client.query).not.toHaveBeenCalled();
  });

  it('a payload of exactly maxPayloadBytes is written', async () => {
    const client = fakeClient('T');
    const w = writer({ maxPayloadBytes: 100 }, {}, fakeEncoder(() => Buffer.alloc(100)).codec);
    await expect(w.writeEvent(client.asClient, event())).resolves.toMatchObject({ bytes: 100 });
    expect(client.query).toHaveBeenCalledTimes(1);
  });

  it('one oversized payload in a batch writes none of the batch', async () => {
    const client = fakeClient('T');
    const w = writer({ maxPayloadBytes: 100 }, {}, fakeEncoder((p) => Buffer.alloc((p as { n: number }).n === 2 ? 500 : 10)).codec);
    expect((await rejection(w.writeEvents(client.asClient, [event(1), event(2), event(3)]))).code).toBe('PAYLOAD_TOO_LARGE');
    expect(client.query).not.toHaveBeenCalled();
  });

  it('an invalid second event writes nothing and the message names #1 (0-based index)', async () => {
    const client = fakeClient('T');
    const error = await rejection(writer().writeEvents(client.asClient, [event(0), event(1, { aggregateId: '' })]));
    expect(error.code).toBe('EVENT_INVALID');
    expect(error.message).toContain('Invalid outbox event #1;');
    expect(error.message).toContain('aggregateId');
    expect(client.query).not.toHaveBeenCalled();
  });

  it('a single invalid event is named without an index', async () => {
    const error = await rejection(writer().writeEvent(fakeClient('T').asClient, event(0, { aggregateType: 'a b' })));
    expect(error.message).toContain('Invalid outbox event;');
  });

  it('deleteAfterInsert: a DELETE ... = ANY($1::uuid[]) of the same ids follows the INSERT', async () => {
    const client = fakeClient('T');
    const w = writer({ schema: 's"x', table: 'o"x' }, { deleteAfterInsert: true });
    const written = await w.writeEvents(client.asClient, [event(1), event(2)]);
    expect(client.query).toHaveBeenCalledTimes(2);
    expect(client.query.mock.calls[0]?.[0]).toMatch(/^INSERT INTO "s""x"\."o""x" /);
    expect(client.query.mock.calls[1]).toEqual(['DELETE FROM "s""x"."o""x" WHERE id = ANY($1::uuid[])', [written.map((e) => e.id)]]);
  });

  it('without deleteAfterInsert nothing is deleted', async () => {
    const client = fakeClient('T');
    await writer().writeEvents(client.asClient, [event(1), event(2)]);
    expect(client.query).toHaveBeenCalledTimes(1);
    expect(client.query.mock.calls[0]?.[0]).not.toContain('DELETE');
  });
});

describe('large batches', () => {
  const events = Array.from({ length: 2500 }, (_, i) => event(i));

  it('2,500 events are 3 INSERT statements of 1000, 1000 and 500 rows, in order', async () => {
    const client = fakeClient('T');
    const written = await writer().writeEvents(client.asClient, events);
    expect(written).toHaveLength(2500);
    expect(client.query).toHaveBeenCalledTimes(3);
    const calls = client.query.mock.calls as Array<[string, unknown[]]>;
    expect(calls.map(([, params]) => params.length)).toEqual([8000, 8000, 4000]);
    for (const [sql, params] of calls) {
      const rows = params.length / 8;
      expect(sql.startsWith('INSERT INTO "public"."outbox" ')).toBe(true);
      expect(sql).toContain(`($${(rows - 1) * 8 + 1}, $${(rows - 1) * 8 + 2}, $${(rows - 1) * 8 + 3}, $${(rows - 1) * 8 + 4}, $${(rows - 1) * 8 + 5}, $${(rows - 1) * 8 + 6}, $${(rows - 1) * 8 + 7}, $${rows * 8})`);
      expect(sql).not.toContain(`$${rows * 8 + 1}`);
      expect(sql.match(/\(\$/g)).toHaveLength(rows);
    }
    // the rows keep the order of the events, across chunk boundaries
    const ids = calls.flatMap(([, params]) => params.filter((_, i) => i % 8 === 0));
    expect(ids).toEqual(written.map((w) => w.id));
    const aggregateIds = calls.flatMap(([, params]) => params.filter((_, i) => i % 8 === 2));
    expect(aggregateIds).toEqual(events.map((e) => e.aggregateId));
  });

  it('with deleteAfterInsert each chunk is followed by the DELETE of its own ids', async () => {
    const client = fakeClient('T');
    const written = await writer({}, { deleteAfterInsert: true }).writeEvents(client.asClient, events);
    const calls = client.query.mock.calls as Array<[string, unknown[]]>;
    expect(calls.map(([sql]) => sql.split(' ')[0])).toEqual(['INSERT', 'DELETE', 'INSERT', 'DELETE', 'INSERT', 'DELETE']);
    const ids = written.map((w) => w.id);
    expect(calls[1]?.[1]).toEqual([ids.slice(0, 1000)]);
    expect(calls[3]?.[1]).toEqual([ids.slice(1000, 2000)]);
    expect(calls[5]?.[1]).toEqual([ids.slice(2000)]);
  });
});

describe('prepareInsert (the outbox row inside the caller\'s own statement)', () => {
  it('numbers its placeholders from firstParam and returns 8 values per event', async () => {
    const prepared = await writer().prepareInsert([event(1), event(2)], { firstParam: 6 });
    expect(prepared.text).toMatch(/^INSERT INTO "public"\."outbox" \(id, aggregate_type, aggregate_id, event_type, payload, content_type, traceparent, headers\) VALUES /);
    expect(prepared.text).toContain('($6, $7, $8, $9, $10, $11, $12, $13), ($14, $15, $16, $17, $18, $19, $20, $21)');
    expect(prepared.text).not.toContain('$5,');
    expect(prepared.values).toHaveLength(16);
    expect(prepared.events.map((e) => e.id)).toEqual([prepared.values[0], prepared.values[8]]);
  });

  it('validates before returning anything: an invalid event throws EVENT_INVALID', async () => {
    const error = await rejection(writer().prepareInsert([event(1), { ...event(2), aggregateType: 'bad type' }]));
    expect(error.code).toBe('EVENT_INVALID');
  });

  it('refuses deleteAfterInsert, an empty list and a bad firstParam, each naming the problem', async () => {
    expect((await rejection(writer({}, { deleteAfterInsert: true }).prepareInsert([event(1)]))).message).toMatch(/deleteAfterInsert/);
    expect((await rejection(writer().prepareInsert([]))).message).toMatch(/1 to 1000 events, got 0/);
    expect((await rejection(writer().prepareInsert([event(1)], { firstParam: 0 }))).message).toMatch(/firstParam .* got 0/);
  });
});

describe('writeWith (the business statement and the outbox row as one statement)', () => {
  function fakeDb(rows: Array<Record<string, unknown>> = []) {
    const query = jest.fn(async (_config: { name?: string; text: string; values: unknown[] }) => ({ rows, rowCount: rows.length }));
    return { query };
  }
  const business = { text: 'INSERT INTO orders (id, total) VALUES ($1, $2)', values: ['o-1', 5] };

  it('sends ONE named statement: the business statement as a CTE, its parameters first, the outbox parameters after', async () => {
    const db = fakeDb();
    const { events, rows } = await writer().writeWith(db, business, [event(1)]);
    expect(db.query).toHaveBeenCalledTimes(1);
    const sent = db.query.mock.calls[0]?.[0] as { name: string; text: string; values: unknown[] };
    expect(sent.text).toBe(`WITH biz AS (${business.text}) INSERT INTO "public"."outbox" (id, aggregate_type, aggregate_id, event_type, payload, content_type, traceparent, headers) VALUES ($3, $4, $5, $6, $7, $8, $9, $10)`);
    expect(sent.values.slice(0, 2)).toEqual(['o-1', 5]);
    expect(sent.values[2]).toBe(events[0]?.id);
    expect(sent.values.slice(3, 6)).toEqual(['order', 'order-1', 'OrderCreated']);
    expect(sent.name).toMatch(/^outbox-[0-9a-f]{20}$/);
    expect(rows).toEqual([]);
  });

  it('reuses the statement name for the same business text and event count, and another for another shape', async () => {
    const db = fakeDb();
    const w = writer();
    await w.writeWith(db, business, [event(1)]);
    await w.writeWith(db, { ...business, values: ['o-2', 7] }, [event(2)]);
    await w.writeWith(db, business, [event(3), event(4)]);
    const names = db.query.mock.calls.map(([c]) => c.name);
    expect(names[0]).toBe(names[1]);
    expect(names[2]).not.toBe(names[0]);
  });

  it('returning: true returns the business statement\'s RETURNING rows', async () => {
    const db = fakeDb([{ id: 'o-1' }]);
    const result = await writer().writeWith(db, { ...business, text: `${business.text} RETURNING id` }, [event(1)], { returning: true });
    expect(result.rows).toEqual([{ id: 'o-1' }]);
    const text = db.query.mock.calls[0]?.[0].text;
    expect(text).toMatch(/^WITH biz AS \(.* RETURNING id\), outbox_rows AS \(INSERT INTO .*\) SELECT \* FROM biz$/);
    // the outbox rows read biz first: the business statement's row locks come before their seq
    expect(text).toContain('VALUES ($3::uuid, $4::text, $5::text, $6::text, $7::bytea, $8::text, $9::text, $10::text)) AS v CROSS JOIN (SELECT count(*) FROM biz) AS after_biz');
  });

  it('refuses a bad event, an empty business statement, no events and deleteAfterInsert before any SQL', async () => {
    const db = fakeDb();
    expect((await rejection(writer().writeWith(db, business, [{ ...event(1), aggregateType: 'bad type' }]))).code).toBe('EVENT_INVALID');
    expect((await rejection(writer().writeWith(db, { text: ' ' }, [event(1)]))).message).toMatch(/business statement/);
    expect((await rejection(writer().writeWith(db, business, []))).message).toMatch(/1 to 1000 events, got 0/);
    expect((await rejection(writer({}, { deleteAfterInsert: true }).writeWith(db, business, [event(1)]))).message).toMatch(/writeWith cannot be used with deleteAfterInsert/);
    expect(db.query).not.toHaveBeenCalled();
  });

  it('a refused limit constraint is explained as for writeEvent', async () => {
    const refused = Object.assign(new Error('new row violates check constraint'), { code: '23514', constraint: 'outbox_payload_size' });
    const db = { query: jest.fn(async (): Promise<{ rows: [] }> => Promise.reject(refused)) };
    const error = await rejection(writer().writeWith(db, business, [event(1)]));
    expect(error.code).toBe('PAYLOAD_TOO_LARGE');
  });
});
