import { isOutboxError } from '../../../src/errors';
import { headerText, parseExtraHeaders, parseRecordHeaders } from '../../../src/router/record-headers';

const ID = '0b7e3c1c-8a63-4c9a-9a51-0d2a8c1f5e77';
const base = { id: Buffer.from(ID), eventType: Buffer.from('OrderCreated'), contentType: Buffer.from('application/json') };

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    return isOutboxError(error) ? error.code : 'not an OutboxError';
  }
  return undefined;
}

describe('parseRecordHeaders', () => {
  it('reads the Event Router headers from Buffers', () => {
    const parsed = parseRecordHeaders({ ...base, traceparent: Buffer.from('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'), headers: Buffer.from('{"tenant":"acme"}') });
    expect(parsed).toEqual({
      id: ID,
      eventType: 'OrderCreated',
      contentType: 'application/json',
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      extra: { tenant: 'acme' },
    });
  });

  it('treats an absent, null or empty headers header as no extra headers', () => {
    expect(parseRecordHeaders(base).extra).toEqual({});
    expect(parseRecordHeaders({ ...base, headers: Buffer.from('null') }).extra).toEqual({});
    expect(parseRecordHeaders({ ...base, headers: Buffer.from('') }).extra).toEqual({});
  });

  it('lower-cases the id, so the inbox sees one key per event', () => {
    expect(parseRecordHeaders({ ...base, id: ID.toUpperCase() }).id).toBe(ID);
  });

  it('names every missing header', () => {
    try {
      parseRecordHeaders({ contentType: 'application/json' });
      throw new Error('no error');
    } catch (error) {
      expect(isOutboxError(error, 'RECORD_INVALID')).toBe(true);
      expect((error as Error).message).toContain('id, eventType');
    }
    expect(codeOf(() => parseRecordHeaders(undefined))).toBe('RECORD_INVALID');
  });

  it('keeps a bigint or text id exactly (a Debezium outbox\'s), refuses one longer than 200 characters and a headers header that is not a JSON object of strings', () => {
    expect(parseRecordHeaders({ ...base, id: '42' }).id).toBe('42');
    expect(parseRecordHeaders({ ...base, id: 'Order-7A' }).id).toBe('Order-7A');
    expect(codeOf(() => parseRecordHeaders({ ...base, id: 'x'.repeat(201) }))).toBe('RECORD_INVALID');
    expect(codeOf(() => parseExtraHeaders('{oops'))).toBe('RECORD_INVALID');
    expect(codeOf(() => parseExtraHeaders('[1]'))).toBe('RECORD_INVALID');
    expect(codeOf(() => parseExtraHeaders('{"n":1}'))).toBe('RECORD_INVALID');
  });

  it('headerText: first of repeated headers, undefined for missing or null', () => {
    expect(headerText({ a: [Buffer.from('one'), Buffer.from('two')] }, 'a')).toBe('one');
    expect(headerText({ a: 'plain' }, 'a')).toBe('plain');
    expect(headerText({ a: null as unknown as undefined }, 'a')).toBeUndefined();
    expect(headerText({}, 'a')).toBeUndefined();
  });
});
