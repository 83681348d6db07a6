import { decodeValue, parseEnvelopeHeaders, DEFAULT_ENVELOPE, type EnvelopeSettings, type ValueCodec } from '../../../src/envelope';
import { isOutboxError } from '../../../src/errors';

const PAYLOAD = { orderId: 7, lines: [{ sku: 'a', qty: 2 }], note: 'ü' };
const json = (value: unknown) => Buffer.from(JSON.stringify(value));
/** The codec as the router gives it: JSON bytes decoded; Avro answered by a stand-in for the registry codec. */
const codec: ValueCodec = {
  decode: (bytes, contentType) => Promise.resolve(contentType === 'application/json' ? JSON.parse(bytes.toString('utf8')) : { avro: true, bytes: bytes.length }),
};
const settings = (valueFormat: EnvelopeSettings['valueFormat'], eventTypeField?: string) => ({ valueFormat, eventTypeField });

async function codeOf(work: Promise<unknown>): Promise<string | undefined> {
  try {
    await work;
  } catch (error) {
    return isOutboxError(error) ? error.code : `not an OutboxError: ${String(error)}`;
  }
  return undefined;
}

describe('decodeValue: every converter a Debezium outbox runs gives the same payload', () => {
  const text = JSON.stringify(PAYLOAD);
  it.each([
    ['bytes (BinaryDataConverter / ByteArrayConverter on a bytea column)', 'bytes', json(PAYLOAD), 'application/json'],
    ['string (StringConverter)', 'string', Buffer.from(text), undefined],
    ['json, table.expand.json.payload (a JSON object)', 'json', json(PAYLOAD), undefined],
    ['json, jsonb not expanded (a JSON string holding the column)', 'json', json(text), undefined],
    ['json-with-schema, expanded', 'json-with-schema', json({ schema: { type: 'struct', fields: [] }, payload: PAYLOAD }), undefined],
    ['json-with-schema, not expanded (io.debezium.data.Json)', 'json-with-schema', json({ schema: { type: 'string', name: 'io.debezium.data.Json' }, payload: text }), undefined],
    ['json-with-schema, a bytea column (base64)', 'json-with-schema', json({ schema: { type: 'bytes' }, payload: Buffer.from(text).toString('base64') }), undefined],
  ] as const)('%s', async (_name, format, bytes, contentType) => {
    expect((await decodeValue(bytes, settings(format), contentType, codec)).payload).toEqual(PAYLOAD);
  });

  it('avro goes through the codec as Avro whatever the headers say; a string or bytes schema holds the column\'s JSON', async () => {
    const seen: string[] = [];
    const avro = (value: unknown): ValueCodec => ({ decode: (_b, contentType) => (seen.push(contentType), Promise.resolve(value)) });
    expect((await decodeValue(Buffer.from([0, 0, 0, 0, 1, 2]), settings('avro'), undefined, avro(PAYLOAD))).payload).toEqual(PAYLOAD);
    expect((await decodeValue(Buffer.from([0]), settings('avro'), undefined, avro(text))).payload).toEqual(PAYLOAD);
    expect((await decodeValue(Buffer.from([0]), settings('avro'), undefined, avro(Buffer.from(text)))).payload).toEqual(PAYLOAD);
    expect(seen).toEqual(Array(3).fill('application/vnd.apache.avro+binary'));
  });

  it('reads the event type from a value field (Debezium\'s type:envelope:<field> placement)', async () => {
    const value = { payload: text, eventType: 'OrderCreated' };
    expect(await decodeValue(json(value), settings('json', 'eventType'), undefined, codec)).toEqual({ payload: PAYLOAD, eventType: 'OrderCreated' });
    expect(await decodeValue(json({ schema: {}, payload: { payload: PAYLOAD, eventType: 'OrderCreated' } }), settings('json-with-schema', 'eventType'), undefined, codec)).toEqual({
      payload: PAYLOAD,
      eventType: 'OrderCreated',
    });
    expect(await codeOf(decodeValue(json(PAYLOAD), settings('json', 'eventType'), undefined, codec))).toBe('RECORD_INVALID');
  });

  it('fails with DECODE_FAILED naming the setting when the value is not what valueFormat says', async () => {
    await expect(decodeValue(json(PAYLOAD), settings('json-with-schema'), undefined, codec)).rejects.toThrow(/not a JsonConverter envelope.*valueFormat json/);
    await expect(decodeValue(Buffer.from('Struct{id=1}'), settings('string'), undefined, codec)).rejects.toThrow(/valueFormat string.*value converter/);
    expect(await codeOf(decodeValue(Buffer.from([0xff, 0xfe]), settings('json'), undefined, codec))).toBe('DECODE_FAILED');
    expect(await codeOf(decodeValue(json(PAYLOAD), settings('bytes'), undefined, codec))).toBe('RECORD_INVALID');
  });
});

describe('parseEnvelopeHeaders with router.envelope', () => {
  const quarkus = { id: Buffer.from('1001'), eventType: Buffer.from('OrderCreated') };
  it('takes a record without contentType when defaultContentType is set, and refuses it without (today\'s refusal)', () => {
    expect(parseEnvelopeHeaders(quarkus, { ...DEFAULT_ENVELOPE, defaultContentType: 'application/json' })).toMatchObject({ id: '1001', eventType: 'OrderCreated', contentType: 'application/json' });
    expect(() => parseEnvelopeHeaders(quarkus)).toThrow(/lacks the header\(s\) contentType.*router\.envelope\.defaultContentType/);
    // A contentType header, when the record has one, wins over the default.
    expect(parseEnvelopeHeaders({ ...quarkus, contentType: 'application/vnd.apache.avro+binary' }, { ...DEFAULT_ENVELOPE, defaultContentType: 'application/json' }).contentType).toBe(
      'application/vnd.apache.avro+binary',
    );
  });

  it('needs no contentType for the other value formats, reads other header names, and no type header with eventTypeField', () => {
    expect(parseEnvelopeHeaders(quarkus, { ...DEFAULT_ENVELOPE, valueFormat: 'json' })).toEqual({ id: '1001', eventType: 'OrderCreated', extra: {}, traceparent: undefined });
    const custom: EnvelopeSettings = { idHeader: 'eventId', eventTypeHeader: 'type', valueFormat: 'string' };
    expect(parseEnvelopeHeaders({ eventId: 'A-1', type: 'Shipped' }, custom)).toMatchObject({ id: 'A-1', eventType: 'Shipped' });
    expect(() => parseEnvelopeHeaders({ id: 'A-1', eventType: 'Shipped' }, custom)).toThrow(/eventId, type.*header "eventId".*header "type"/);
    expect(parseEnvelopeHeaders({ id: '5' }, { ...DEFAULT_ENVELOPE, valueFormat: 'json', eventTypeField: 'eventType' })).toEqual({ id: '5', extra: {}, traceparent: undefined });
  });
});
