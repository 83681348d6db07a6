/** src/codec/payload-validation.ts: every bad field named, with its value's type and the expected type. */
import { createSchemaCatalogue } from '../../../src/codec';
import { validateAvroPayload } from '../../../src/codec/payload-validation';
import { OutboxError } from '../../../src/errors';

const orderCreated = createSchemaCatalogue().get('order', 'OrderCreated');
const valid = () => ({
  orderId: 'o-1',
  customerId: 'c-1',
  currency: 'EUR',
  totalCents: 1999,
  lines: [{ sku: 'SKU-1', quantity: 2, priceCents: 1000 }],
  placedAt: new Date('2026-11-30T12:00:00Z'),
});

function problems(payload: unknown): OutboxError {
  try {
    validateAvroPayload(orderCreated, payload);
  } catch (error) {
    if (error instanceof OutboxError) return error;
    throw error;
  }
  throw new Error('expected PAYLOAD_INVALID');
}

describe('Avro payload validation', () => {
  it('accepts a valid payload, with the timestamp as a Date or as epoch millis', () => {
    expect(() => validateAvroPayload(orderCreated, valid())).not.toThrow();
    expect(() => validateAvroPayload(orderCreated, { ...valid(), placedAt: Date.parse('2026-11-30T12:00:00Z') })).not.toThrow();
  });

  it('names every bad field at once: path, the value and its type, the expected type', () => {
    const payload = { ...valid(), totalCents: '1999', currency: undefined, lines: [{ sku: 'S', quantity: 2.5, priceCents: 1 }], placedAt: '2026-11-30' };
    const error = problems(payload);
    expect(error.code).toBe('PAYLOAD_INVALID');
    expect(error.retriable).toBe(false);
    expect(error.message).toContain('totalCents: got string "1999", expected long (safe integer)');
    expect(error.message).toContain('currency: got undefined (missing), expected string');
    expect(error.message).toContain('lines[0].quantity: got number 2.5, expected int (32-bit integer)');
    expect(error.message).toContain('placedAt: got string "2026-11-30", expected timestamp-millis (a Date or integer epoch milliseconds)');
    expect(error.message).toContain('OrderCreated payload of aggregate type "order"');
    expect(error.details.fields).toEqual(expect.arrayContaining(['totalCents', 'currency', 'lines[0].quantity', 'placedAt']));
    expect(error.details.fields).toHaveLength(4);
  });

  it('rejects fields the schema does not declare (avsc would drop them silently)', () => {
    const error = problems({ ...valid(), totalcents: 5, lines: [{ sku: 'S', quantity: 1, priceCents: 1, discount: 3 }] });
    expect(error.message).toContain('totalcents: not a field of dev.outboxrouter.order.OrderCreated (it has: orderId, customerId, currency, totalCents, lines, placedAt)');
    expect(error.message).toContain('lines[0].discount: not a field of dev.outboxrouter.order.OrderLine');
  });

  it('reports a payload that is not an object at all', () => {
    expect(problems(null).message).toContain('(the payload itself): got null, expected record dev.outboxrouter.order.OrderCreated');
    expect(problems({ ...valid(), lines: 'none' }).message).toContain('lines: got string "none", expected array of record dev.outboxrouter.order.OrderLine');
  });

  it('rejects a long beyond 2^53, which would lose precision', () => {
    expect(problems({ ...valid(), totalCents: 2 ** 60 }).message).toMatch(/totalCents: got number \d+ \(beyond 2\^53\), expected long/);
  });
});
