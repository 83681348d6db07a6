/** src/envelope: the header and column names of the record contract, and the connector template that must agree. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  additionalPlacement,
  DLQ_HEADER,
  envelopeOf,
  EVENT_ROUTER_FIELDS,
  HEADER,
  OUTBOX_COLUMNS,
  parseRecordHeaders,
  RESERVED_HEADERS,
} from '../../../src/envelope';
import { isOutboxError } from '../../../src/errors';
import { RESERVED_HEADERS as PRODUCER_RESERVED } from '../../../src/producer';
import { buildDeadLetter } from '../../../src/router/dead-letter';

const template = JSON.parse(readFileSync(join(__dirname, '../../../connect/outbox-connector.json'), 'utf8')) as Record<string, string>;

describe('the record envelope', () => {
  it("the connector template's Event Router fields and additional placement are the module's names", () => {
    expect(template['transforms.outbox.table.fields.additional.placement']).toBe(additionalPlacement());
    expect(additionalPlacement()).toBe('event_type:header:eventType,content_type:header:contentType,traceparent:header:traceparent,headers:header:headers');
    expect(template['transforms.outbox.table.field.event.id']).toBe(EVENT_ROUTER_FIELDS.id);
    expect(template['transforms.outbox.table.field.event.key']).toBe(EVENT_ROUTER_FIELDS.key);
    expect(template['transforms.outbox.table.field.event.payload']).toBe(EVENT_ROUTER_FIELDS.payload);
    expect(template['transforms.outbox.route.by.field']).toBe(EVENT_ROUTER_FIELDS.routeBy);
    for (const column of Object.values(EVENT_ROUTER_FIELDS)) expect(OUTBOX_COLUMNS).toContain(column);
  });

  it('the reserved header names are the envelope headers, for the writer too', () => {
    expect([...RESERVED_HEADERS]).toEqual(['id', 'eventType', 'contentType', 'traceparent', 'headers']);
    expect(PRODUCER_RESERVED).toBe(RESERVED_HEADERS);
  });

  it('what the relay builds from a row, the router parses back', () => {
    const row = { id: '0190f1a2-0000-7000-8000-000000000001', aggregate_type: 'order', aggregate_id: 'o-1', event_type: 'OrderCreated', payload: Buffer.from('{}'), content_type: 'application/json', traceparent: null, headers: '{"a":"b"}' };
    const record = envelopeOf(row);
    expect(record).toEqual({ key: 'o-1', value: row.payload, headers: { id: row.id, eventType: 'OrderCreated', contentType: 'application/json', headers: '{"a":"b"}' } });
    expect(parseRecordHeaders(record.headers)).toEqual({ id: row.id, eventType: 'OrderCreated', contentType: 'application/json', traceparent: undefined, extra: { a: 'b' } });
  });

  it('a dead letter carries the x- headers named here', () => {
    const letter = buildDeadLetter({ topic: 't', partition: 1, offset: '7', key: 'k', value: 'v', headers: { [HEADER.id]: 'x' }, errorCode: 'E', errorMessage: 'm', attempts: 3, consumer: 'c' });
    expect(Object.keys(letter.headers ?? {}).sort()).toEqual(
      [HEADER.id, DLQ_HEADER.originalTopic, DLQ_HEADER.originalPartition, DLQ_HEADER.originalOffset, DLQ_HEADER.errorCode, DLQ_HEADER.errorMessage, DLQ_HEADER.attempts, DLQ_HEADER.consumer, DLQ_HEADER.firstDeadLetteredAt].sort(),
    );
    expect(letter.headers?.['x-original-topic']).toBe('t');
    expect(letter.headers?.['x-attempts']).toBe('3');
  });
});

describe('an envelope header that repeats (kafkajs gives an array)', () => {
  const ID = '0190f1a2-0000-7000-8000-000000000001';
  const OTHER = '0190f1a2-0000-7000-8000-000000000002';
  const base = { [HEADER.id]: Buffer.from(ID), [HEADER.eventType]: Buffer.from('OrderCreated'), [HEADER.contentType]: Buffer.from('application/json') };
  const refusal = (headers: Record<string, unknown>) => {
    try {
      parseRecordHeaders(headers as never);
    } catch (error) {
      return isOutboxError(error) ? { code: error.code, message: error.message } : { code: 'not an OutboxError', message: String(error) };
    }
    return undefined;
  };

  it.each([
    [HEADER.id, [Buffer.from(ID), Buffer.from(OTHER)]],
    [HEADER.eventType, [Buffer.from('OrderCreated'), Buffer.from('OrderCancelled')]],
    [HEADER.contentType, [Buffer.from('application/json'), Buffer.from('application/vnd.apache.avro+binary')]],
    [HEADER.headers, [Buffer.from('{"tenant":"acme"}'), Buffer.from('{"tenant":"evil"}')]],
  ])('with different values of %s is RECORD_INVALID, naming the header and its values', (name, values) => {
    const refused = refusal({ ...base, [name]: values });
    expect(refused?.code).toBe('RECORD_INVALID');
    expect(refused?.message).toContain(`the ${name} header 2 times with different values`);
  });

  it("traceparent twice (a tracing agent on the Connect worker adds its own) is read as the first non-empty value, not refused", () => {
    const router = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const agent = '00-11111111111111111111111111111111-2222222222222222-01';
    expect(parseRecordHeaders({ ...base, [HEADER.traceparent]: [Buffer.from(router), Buffer.from(agent)] } as never).traceparent).toBe(router);
    // The Event Router's header is null when the column is: the agent's is then the only trace there is.
    expect(parseRecordHeaders({ ...base, [HEADER.traceparent]: [null, Buffer.from(agent)] } as never).traceparent).toBe(agent);
  });

  it('with the same value twice is read as that value', () => {
    const parsed = parseRecordHeaders({ ...base, [HEADER.id]: [Buffer.from(ID), ID], [HEADER.headers]: [Buffer.from('{"a":"b"}'), Buffer.from('{"a":"b"}')] });
    expect(parsed).toMatchObject({ id: ID, extra: { a: 'b' } });
  });

  it('outside the envelope still reads the first value (the router only reads its own names there)', () => {
    expect(parseRecordHeaders({ ...base, other: [Buffer.from('1'), Buffer.from('2')] }).id).toBe(ID);
  });
});
