/**
 * src/producer/event.ts: validateEvent checks the envelope of an outbox event (not its payload).
 */
import { OutboxError, isOutboxError } from '../../../src/errors';
import { validateEvent, type OutboxEvent } from '../../../src/producer';

const good: OutboxEvent = {
  id: '3f2b8c1e-9a4d-4e6b-8f1a-2c3d4e5f6a7b',
  aggregateType: 'order',
  aggregateId: 'order-42',
  type: 'OrderCreated',
  payload: { total: 12 },
  traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
  headers: { tenant: 'acme' },
  contentType: 'application/json',
};

function invalid(event: unknown, index?: number): OutboxError {
  try {
    validateEvent(event as OutboxEvent, index);
  } catch (error) {
    if (isOutboxError(error)) return error;
    throw error;
  }
  throw new Error('expected EVENT_INVALID, validateEvent accepted the event');
}

describe('validateEvent', () => {
  it('accepts a complete event and a minimal one', () => {
    expect(() => validateEvent(good)).not.toThrow();
    expect(() => validateEvent({ aggregateType: 'a.b_c-1', aggregateId: 'x', type: 'T', payload: null })).not.toThrow();
  });

  it.each<[string, Partial<Record<keyof OutboxEvent | 'extra', unknown>>, string]>([
    ['aggregateType with a space', { aggregateType: 'order items' }, 'aggregateType'],
    ['aggregateType with a slash', { aggregateType: 'order/items' }, 'aggregateType'],
    ['empty aggregateType', { aggregateType: '' }, 'aggregateType'],
    ['empty aggregateId', { aggregateId: '' }, 'aggregateId'],
    ['type with a slash', { type: '../OrderCreated' }, 'type'],
    ['id that is not a uuid', { id: 'not-a-uuid' }, 'id'],
    ['traceparent in the wrong shape', { traceparent: '00-abc-def-01' }, 'traceparent'],
    ['traceparent in upper case', { traceparent: '00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01' }, 'traceparent'],
    ['unknown contentType', { contentType: 'text/plain' }, 'contentType'],
  ])('%s is EVENT_INVALID naming the field', (_what, patch, field) => {
    const error = invalid({ ...good, ...patch });
    expect(error.code).toBe('EVENT_INVALID');
    expect(error.message).toMatch(new RegExp(`^  - ${field}: `, 'm'));
  });

  it('a bad aggregateType shows the rule and the value', () => {
    const error = invalid({ ...good, aggregateType: 'order/items' });
    expect(error.message).toContain('letters, digits, ".", "_" and "-" only');
    expect(error.message).toContain('"order/items"');
  });

  it.each(['eventType', 'id', 'contentType', 'traceparent', 'headers'])('the reserved header name %s is rejected', (name) => {
    const error = invalid({ ...good, headers: { tenant: 'acme', [name]: 'x' } });
    expect(error.code).toBe('EVENT_INVALID');
    expect(error.message).toMatch(/^ {2}- headers: must not use the reserved names/m);
  });

  it('a missing payload is EVENT_INVALID naming payload', () => {
    const { payload: _omit, ...withoutPayload } = good;
    const error = invalid(withoutPayload);
    expect(error.code).toBe('EVENT_INVALID');
    expect(error.message).toMatch(/^ {2}- payload: /m);
    expect(invalid({ ...good, payload: undefined }).message).toMatch(/^ {2}- payload: /m);
  });

  it('an unknown key is EVENT_INVALID naming it', () => {
    const error = invalid({ ...good, eventType: 'OrderCreated' });
    expect(error.code).toBe('EVENT_INVALID');
    expect(error.message).toContain('"eventType"');
  });

  it('lists every invalid field in one error', () => {
    const error = invalid({ ...good, aggregateType: 'a b', aggregateId: '', id: 'nope' });
    for (const field of ['aggregateType', 'aggregateId', 'id']) expect(error.message).toMatch(new RegExp(`^  - ${field}: `, 'm'));
  });

  it('names the index when given, and none otherwise', () => {
    expect(invalid({ ...good, aggregateId: '' }, 3).message).toContain('Invalid outbox event #3;');
    expect(invalid({ ...good, aggregateId: '' }).message).toContain('Invalid outbox event;');
  });

  it('never echoes the payload, even when the error is about the event as a whole', () => {
    const error = invalid({ payload: { ssn: 'PAYLOAD-SECRET-123' }, aggregateType: 'order', aggregateId: 'o1', type: 'T', extra: 1 });
    expect(error.message).toContain('"extra"');
    expect(error.message).not.toContain('PAYLOAD-SECRET-123');
  });
});

describe('validateEvent on the plain-event fast path (no id, no headers: checked without zod)', () => {
  const plain: OutboxEvent = { aggregateType: 'order', aggregateId: 'order-42', type: 'OrderCreated', payload: { total: 12 } };

  it.each<[string, Record<string, unknown>, string]>([
    ['aggregateType with a space', { aggregateType: 'order items' }, 'aggregateType'],
    ['aggregateType too long for a topic', { aggregateType: 'a'.repeat(237) }, 'aggregateType'],
    ['empty aggregateId', { aggregateId: '' }, 'aggregateId'],
    ['aggregateId over 4096 bytes in UTF-8', { aggregateId: 'é'.repeat(2049) }, 'aggregateId'],
    ['aggregateId that is not a string', { aggregateId: 42 }, 'aggregateId'],
    ['type with a slash', { type: '../OrderCreated' }, 'type'],
    ['traceparent in upper case', { traceparent: '00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01' }, 'traceparent'],
    ['unknown contentType', { contentType: 'text/plain' }, 'contentType'],
    ['an unknown key', { extra: 1 }, '(event)'],
  ])('%s is refused as the schema refuses it (the message names the field)', (_what, patch, field) => {
    const error = invalid({ ...plain, ...patch });
    expect(error.code).toBe('EVENT_INVALID');
    expect(error.message).toContain(`  - ${field}`);
  });

  it('a type pair accepted once is accepted again, and a bad aggregateId of a known pair is still refused', () => {
    expect(() => validateEvent(plain)).not.toThrow();
    expect(() => validateEvent(plain)).not.toThrow();
    expect(invalid({ ...plain, aggregateId: '' }).message).toMatch(/aggregateId/);
    expect(invalid({ ...plain, payload: undefined }).message).toMatch(/payload: is missing/);
  });

  it('accepts what the schema accepts: traceparent, contentType and a 4096-byte aggregateId', () => {
    expect(() => validateEvent({ ...plain, traceparent: good.traceparent, contentType: 'application/json', aggregateId: 'x'.repeat(4096) })).not.toThrow();
  });
});
