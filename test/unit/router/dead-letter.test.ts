import { KafkaJSConnectionError, KafkaJSNonRetriableError, KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError, type IHeaders } from 'kafkajs';
import { buildDeadLetter, isRetriableSendError, MAX_ERROR_MESSAGE_CHARS, sanitizeHeaders } from '../../../src/router/dead-letter';
import { headerText } from '../../../src/router/record-headers';

// kafkajs's own record encoder: what producer.send runs on each message (no broker needed).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const encodeRecord = require('kafkajs/src/protocol/recordBatch/record/v0') as (r: { key: unknown; value: unknown; headers?: IHeaders }) => { buffer: Buffer };

describe('buildDeadLetter', () => {
  const input = {
    topic: 'outbox.event.order',
    partition: 2,
    offset: '41',
    key: Buffer.from('order-1'),
    value: Buffer.from([0, 0, 0, 0, 7, 1, 2]),
    headers: { id: Buffer.from('the-id'), eventType: Buffer.from('OrderCreated'), contentType: Buffer.from('application/vnd.apache.avro+binary') },
    errorCode: 'HANDLER_FAILED',
    errorMessage: 'boom',
    attempts: 5,
    consumer: 'billing',
    timestamp: '1700000000000',
    now: 1800000000000,
  };

  it('keeps key, value and headers and adds where-from and why', () => {
    const letter = buildDeadLetter(input);
    expect(letter.key).toBe(input.key);
    expect(letter.value).toBe(input.value);
    expect(letter.headers).toEqual({
      ...input.headers,
      'x-original-topic': 'outbox.event.order',
      'x-original-partition': '2',
      'x-original-offset': '41',
      'x-error-code': 'HANDLER_FAILED',
      'x-error-message': 'boom',
      'x-attempts': '5',
      'x-consumer': 'billing',
      // the record's own timestamp: the event cannot have been applied before its record was written
      'x-first-dead-lettered-at': '1700000000000',
    });
    expect(buildDeadLetter({ ...input, timestamp: undefined }).headers?.['x-first-dead-lettered-at']).toBe('1800000000000');
  });

  it('a replayed dead letter that fails again carries only the latest x- headers', () => {
    const again = buildDeadLetter({ ...input, headers: { ...input.headers, 'x-error-code': 'OLD', 'x-original-offset': '1', 'x-attempts': '9' }, errorCode: 'NEW' });
    expect(again.headers).toMatchObject({ 'x-error-code': 'NEW', 'x-original-offset': '41', 'x-attempts': '5' });
  });

  it('a replayed event dead-lettered again keeps when it was first dead-lettered, and names the consumer that gave up on it now', () => {
    // the replay's record: its letter's x-first-dead-lettered-at, the replay's target, a new timestamp
    const replayed = { ...input.headers, 'x-first-dead-lettered-at': '1600000000000', 'x-replay-consumer': 'billing', 'x-consumer': 'old', 'x-replayed-at': 'then' };
    const again = buildDeadLetter({ ...input, headers: replayed, timestamp: '1790000000000', errorCode: 'KEY_PARKED' });
    expect(again.headers).toMatchObject({ 'x-first-dead-lettered-at': '1600000000000', 'x-consumer': 'billing' });
    expect(again.headers).not.toHaveProperty('x-replay-consumer');
    expect(again.headers).not.toHaveProperty('x-replayed-at');
  });

  it('caps long error messages', () => {
    const letter = buildDeadLetter({ ...input, errorMessage: 'x'.repeat(10_000) });
    expect(String(letter.headers?.['x-error-message'])).toHaveLength(MAX_ERROR_MESSAGE_CHARS);
  });

  it('any header value can be encoded: null (the Event Router sends NULL columns so) is dropped, bytes kept as they are', () => {
    const nonUtf8 = Buffer.from([0xff, 0xfe, 0x00, 0xc3]);
    const headers = {
      id: Buffer.from('the-id'),
      traceparent: null,
      headers: null,
      raw: nonUtf8,
      text: 'plain',
      many: [Buffer.from('a'), null, 'b'],
      none: [null],
      n: 7,
    } as unknown as IHeaders;
    expect(() => encodeRecord({ key: input.key, value: input.value, headers })).toThrow(/must be of type string/); // what the router used to send
    const letter = buildDeadLetter({ ...input, headers });
    expect(() => encodeRecord({ key: letter.key, value: letter.value, headers: letter.headers })).not.toThrow();
    expect(letter.headers).not.toHaveProperty('traceparent');
    expect(letter.headers).not.toHaveProperty('headers');
    expect(letter.headers).not.toHaveProperty('none');
    expect(letter.headers?.raw).toBe(nonUtf8);
    expect(letter.headers?.many).toEqual([Buffer.from('a'), 'b']);
    expect(letter.headers?.n).toBe('7');
    // the router reads a dropped header exactly as a null one
    expect(headerText(letter.headers, 'traceparent')).toBe(headerText({ traceparent: null } as unknown as IHeaders, 'traceparent'));
  });

  it('sanitizeHeaders drops the names it is told to', () => {
    expect(sanitizeHeaders({ a: 'x', 'x-error-code': 'E' }, (n) => n.startsWith('x-'))).toEqual({ a: 'x' });
  });
});

describe('isRetriableSendError', () => {
  it('waits only on what can come back', () => {
    expect(isRetriableSendError(new KafkaJSConnectionError('broker down'))).toBe(true);
    expect(isRetriableSendError(new KafkaJSNumberOfRetriesExceeded(new KafkaJSConnectionError('down'), { retryCount: 5, retryTime: 100 }))).toBe(true);
    expect(isRetriableSendError(new KafkaJSProtocolError({ message: 'too large', type: 'MESSAGE_TOO_LARGE', code: 10, retriable: false } as never))).toBe(false);
    expect(isRetriableSendError(new KafkaJSNonRetriableError(new KafkaJSProtocolError({ message: 'invalid', type: 'INVALID_RECORD', code: 87, retriable: false } as never)))).toBe(false);
    expect(isRetriableSendError(new TypeError('The "string" argument must be of type string. Received null'))).toBe(false);
  });
});
