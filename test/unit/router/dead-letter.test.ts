import { buildDeadLetter, MAX_ERROR_MESSAGE_CHARS } from '../../../src/router/dead-letter';

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
    });
  });

  it('a replayed dead letter that fails again carries only the latest x- headers', () => {
    const again = buildDeadLetter({ ...input, headers: { ...input.headers, 'x-error-code': 'OLD', 'x-original-offset': '1', 'x-attempts': '9' }, errorCode: 'NEW' });
    expect(again.headers).toMatchObject({ 'x-error-code': 'NEW', 'x-original-offset': '41', 'x-attempts': '5' });
  });

  it('caps long error messages', () => {
    const letter = buildDeadLetter({ ...input, errorMessage: 'x'.repeat(10_000) });
    expect(String(letter.headers?.['x-error-message'])).toHaveLength(MAX_ERROR_MESSAGE_CHARS);
  });
});
