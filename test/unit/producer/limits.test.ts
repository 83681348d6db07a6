/**
 * src/producer/limits.ts: the limits the writer checks and db:provision enforces as CHECK constraints
 * (test/integration/provision.test.ts proves the database gives the same answers for the same rows).
 */
import type { ClientBase } from 'pg';
import { loadConfig } from '../../../src/config';
import { createOutboxWriter, validateEvent, type OutboxEvent } from '../../../src/producer';
import {
  MAX_AGGREGATE_ID_BYTES,
  MAX_AGGREGATE_TYPE_LENGTH,
  MAX_HEADERS_BYTES,
  OUTBOX_LIMIT_CONSTRAINTS,
  explainLimitViolation,
} from '../../../src/producer/limits';
import { outboxLimitConstraints } from '../../../src/provision/outbox-limits';
import { rejection, thrown } from '../../support/expect-error';

const event = (patch: Partial<OutboxEvent>): OutboxEvent => ({ aggregateType: 'order', aggregateId: '1', type: 'OrderCreated', payload: {}, ...patch });

describe('outbox limits', () => {
  it('keep the routed and the dead-letter topic within Kafka’s 249 characters', () => {
    expect(MAX_AGGREGATE_TYPE_LENGTH).toBe(236);
    expect(`outbox.event.${'a'.repeat(MAX_AGGREGATE_TYPE_LENGTH)}`).toHaveLength(249);
    expect(`outbox.dlq.${'a'.repeat(MAX_AGGREGATE_TYPE_LENGTH)}`.length).toBeLessThanOrEqual(249);
  });

  it('the writer accepts an aggregateType of 236 characters and refuses 237, naming the topic rule', () => {
    expect(() => validateEvent(event({ aggregateType: 'a'.repeat(236) }))).not.toThrow();
    const error = thrown(() => validateEvent(event({ aggregateType: 'a'.repeat(237) })));
    expect(error.code).toBe('EVENT_INVALID');
    expect(error.message).toContain('aggregateType: 1 to 236 characters');
    expect(error.message).toContain('outbox.event.<aggregateType>');
  });

  it('counts aggregateId in UTF-8 bytes, as the database does', () => {
    expect(() => validateEvent(event({ aggregateId: 'a'.repeat(MAX_AGGREGATE_ID_BYTES) }))).not.toThrow();
    // 2,049 two-byte characters: under 4,096 characters, over 4,096 bytes
    const error = thrown(() => validateEvent(event({ aggregateId: 'é'.repeat(MAX_AGGREGATE_ID_BYTES / 2 + 1) })));
    expect(error.message).toContain(`aggregateId: at most ${MAX_AGGREGATE_ID_BYTES} bytes`);
  });

  it('refuses headers over 64 KiB of JSON, and accepts exactly 64 KiB', () => {
    const fill = (total: number) => ({ h: 'x'.repeat(total - '{"h":""}'.length) });
    expect(Buffer.byteLength(JSON.stringify(fill(MAX_HEADERS_BYTES)))).toBe(MAX_HEADERS_BYTES);
    expect(() => validateEvent(event({ headers: fill(MAX_HEADERS_BYTES) }))).not.toThrow();
    const error = thrown(() => validateEvent(event({ headers: fill(MAX_HEADERS_BYTES + 1) })));
    expect(error.message).toContain(`headers: at most ${MAX_HEADERS_BYTES} bytes as JSON`);
  });

  it("the CHECK constraints' regular expressions have no bounded repetition, which PostgreSQL runs state by state for every INSERT", () => {
    // {1,236} and {32} in the CHECKs cost 17 µs of database CPU per outbox INSERT, 2 µs without them
    // (bench:limit-checks); the lengths are octet_length tests instead.
    const checks = outboxLimitConstraints(loadConfig({ overrides: {} }));
    expect(checks.map((c) => c.name).sort()).toEqual(Object.values(OUTBOX_LIMIT_CONSTRAINTS).sort());
    for (const { name, check } of checks) expect({ name, bounded: check.match(/\{\d+(,\d*)?\}/g) }).toEqual({ name, bounded: null });
  });

  it('explains each limit constraint by name, and no other constraint', () => {
    for (const name of Object.values(OUTBOX_LIMIT_CONSTRAINTS)) expect(explainLimitViolation(name, 1000)).toEqual(expect.any(String));
    expect(explainLimitViolation(OUTBOX_LIMIT_CONSTRAINTS.payload, 1000)).toContain('at most 1000 bytes');
    expect(explainLimitViolation('orders_pkey', 1000)).toBeUndefined();
    expect(explainLimitViolation(undefined, 1000)).toBeUndefined();
  });
});

describe("the writer and the database's refusal", () => {
  /** A client in a transaction whose INSERT the database refuses with `error`. */
  const refusing = (error: object) =>
    ({ getTransactionStatus: () => 'T', query: jest.fn(async () => Promise.reject(Object.assign(new Error('check violation'), error))) }) as unknown as ClientBase;
  const writer = createOutboxWriter({ outbox: loadConfig({ env: {} }).outbox, codec: { encode: async () => Buffer.from('{}') }, contentType: 'application/json' });

  it.each([
    [OUTBOX_LIMIT_CONSTRAINTS.payload, 'PAYLOAD_TOO_LARGE'],
    [OUTBOX_LIMIT_CONSTRAINTS.headers, 'EVENT_INVALID'],
  ])('a 23514 on %s is %s naming the constraint and the fix', async (constraint, code) => {
    const error = await rejection(writer.writeEvent(refusing({ code: '23514', constraint }), event({})));
    expect(error.code).toBe(code);
    expect(error.message).toContain(`check constraint ${constraint}`);
    expect(error.message).toContain('run db:provision with the same outbox.maxPayloadBytes');
    expect(error.details).toEqual({ constraint, sqlState: '23514' });
  });

  it('any other database error passes through unchanged', async () => {
    const other = { code: '23514', constraint: 'orders_total_check' };
    await expect(writer.writeEvent(refusing(other), event({}))).rejects.toMatchObject(other);
  });
});
