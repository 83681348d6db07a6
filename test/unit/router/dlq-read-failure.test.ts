import { OutboxError } from '../../../src/errors';
import { readFailure } from '../../../src/router/dlq-read';

describe('dlq:replay read failures', () => {
  it('reports a kafkajs error it gave up on as DLQ_UNAVAILABLE naming the topic (it was an INTERNAL "please report it")', () => {
    const kafkajs = Object.assign(new Error('This is not the correct coordinator for this group'), { name: 'KafkaJSProtocolError', retriable: true });
    const error = readFailure('outbox.dlq.order', kafkajs) as OutboxError;
    expect(error).toBeInstanceOf(OutboxError);
    expect(error.code).toBe('DLQ_UNAVAILABLE');
    expect(error.retriable).toBe(true);
    expect(error.message).toContain('Reading outbox.dlq.order failed: This is not the correct coordinator for this group (KafkaJSProtocolError)');
    expect(error.cause).toBe(kafkajs);
  });

  it('leaves the replay\'s own errors and foreign errors as they are', () => {
    const own = new OutboxError('DLQ_UNAVAILABLE', 'no progress');
    expect(readFailure('t', own)).toBe(own);
    const handler = new TypeError('boom');
    expect(readFailure('t', handler)).toBe(handler);
  });
});
