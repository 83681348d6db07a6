import { KafkaJSConnectionError, KafkaJSProtocolError, type KafkaMessage, type Message } from 'kafkajs';
import { DatabaseError } from 'pg';
import { OutboxError } from '../../../src/errors';
import type { EventHandler } from '../../../src/router/types';
import { fakePool } from './fake-pool';
import { fakeDeps, routeOne, type FakeDeps } from './fake-deps';

const ID = '0b7e3c1c-8a63-4c9a-9a51-0d2a8c1f5e77';

function message(headers: Record<string, string>, offset = '0'): KafkaMessage {
  return { key: Buffer.from('order-1'), value: Buffer.from('{"n":1}'), headers, offset, timestamp: '1700000000000', attributes: 0 } as KafkaMessage;
}

const goodHeaders = { id: ID, eventType: 'OrderCreated', contentType: 'application/json' };

function deps(handler: EventHandler, overrides: Partial<FakeDeps> = {}) {
  return fakeDeps({ handlers: { order: { OrderCreated: handler } }, ...overrides });
}

describe('a record through the router (prepare, apply, dead letter)', () => {
  it('builds the event and applies it once; the second delivery is a duplicate', async () => {
    const seen: unknown[] = [];
    const { pool } = fakePool();
    const { d, stats } = deps(async (event) => void seen.push(event), { pool });
    expect(await routeOne('outbox.event.order', 0, message({ ...goodHeaders, headers: '{"a":"b"}' }), d)).toBe('applied');
    expect(await routeOne('outbox.event.order', 0, message(goodHeaders, '1'), d)).toBe('duplicate');
    expect(seen).toEqual([
      { id: ID, aggregateType: 'order', aggregateId: 'order-1', type: 'OrderCreated', payload: { n: 1 }, headers: { a: 'b' }, traceparent: undefined, createdAt: new Date(1700000000000) },
    ]);
    expect(stats).toMatchObject({ received: 2, applied: 1, duplicates: 1 });
  });

  it('waits out an unavailable registry without dead-lettering or counting attempts', async () => {
    let calls = 0;
    const codec = {
      decode: async () => {
        if (++calls <= 3) throw new OutboxError('REGISTRY_UNAVAILABLE', 'down', { retriable: true });
        return { n: 1 };
      },
    };
    const { d, letters, stats } = deps(async () => {}, { codec });
    expect(await routeOne('t', 0, message(goodHeaders), d)).toBe('applied');
    expect(letters).toHaveLength(0);
    expect(stats).toMatchObject({ infrastructureRetries: 3, retries: 0, applied: 1 });
  });

  it('a lost inbox connection is waited out, not held against the record', async () => {
    const { pool } = fakePool({ failInsert: 4 });
    const { d, letters, stats } = deps(async () => {}, { pool });
    expect(await routeOne('t', 0, message(goodHeaders), d)).toBe('applied');
    expect(letters).toHaveLength(0);
    expect(stats).toMatchObject({ infrastructureRetries: 4, retries: 0 });
  });

  it('a non-retriable OutboxError from the handler is dead-lettered at once with its code', async () => {
    const { d, letters, stats } = deps(async () => {
      throw new OutboxError('PAYLOAD_INVALID', 'never valid');
    });
    expect(await routeOne('t', 3, message(goodHeaders, '7'), d)).toBe('dead-lettered');
    expect(stats.retries).toBe(0);
    expect(letters[0]?.message.headers).toMatchObject({ 'x-error-code': 'PAYLOAD_INVALID', 'x-attempts': '1', 'x-original-partition': '3', 'x-original-offset': '7' });
  });

  it('a handler that left its transaction aborted counts as a failure (COMMIT answered ROLLBACK)', async () => {
    const { pool, inbox } = fakePool({ commitCommand: 'ROLLBACK' });
    const { d, letters, stats } = deps(async () => {}, { pool });
    expect(await routeOne('t', 0, message(goodHeaders), d)).toBe('dead-lettered');
    expect(stats.retries).toBe(2);
    expect(inbox.size).toBe(0);
    expect(String(letters[0]?.message.headers?.['x-error-message'])).toMatch(/aborted/);
  });

  it('stopping during a retry wait leaves the record unresolved, without a dead letter', async () => {
    const controller = new AbortController();
    const { d, letters } = deps(
      async () => {
        controller.abort();
        throw new Error('fails');
      },
      { signal: controller.signal, backoff: { initialDelayMs: 60_000, maxDelayMs: 60_000 } },
    );
    expect(await routeOne('t', 0, message(goodHeaders), d)).toBe('aborted');
    expect(letters).toHaveLength(0);
  });

  it('a failing dead-letter producer is retried until the letter is written', async () => {
    let sends = 0;
    const { d, stats } = deps(async () => {}, {
      sendDeadLetter: async () => {
        if (++sends <= 2) throw new KafkaJSConnectionError('broker down');
      },
    });
    expect(await routeOne('t', 0, message({ ...goodHeaders, eventType: 'Nope' }), d)).toBe('dead-lettered');
    expect(sends).toBe(3);
    expect(stats).toMatchObject({ deadLettered: 1, infrastructureRetries: 2 });
  });

  it('a dead letter the DLQ refuses for good is not waited on: it is sent again reduced (no value, identity and x- headers kept)', async () => {
    const sent: Message[] = [];
    const tooLarge = new KafkaJSProtocolError({ message: 'The request included a message larger than the max message size the server will accept', type: 'MESSAGE_TOO_LARGE', code: 10, retriable: false } as never);
    const { d, stats } = deps(async () => {}, {
      sendDeadLetter: async (_topic, letter) => {
        sent.push(letter);
        if (sent.length === 1) throw tooLarge;
      },
    });
    const m = message({ ...goodHeaders, eventType: 'Nope', headers: '{"tenant":"acme"}' });
    expect(await routeOne('t', 0, m, d)).toBe('dead-lettered');
    expect(sent).toHaveLength(2);
    expect(stats).toMatchObject({ deadLettered: 1, infrastructureRetries: 0 });
    expect(sent[1]?.value).toBeNull();
    expect(sent[1]?.headers).toMatchObject({ id: ID, eventType: 'Nope', 'x-error-code': 'HANDLER_NOT_FOUND' });
    expect(sent[1]?.headers).not.toHaveProperty('headers');
    expect(String(sent[1]?.headers?.['x-dead-letter-reduced'])).toMatch(/larger than the max message size/);
  });

  it('a DLQ that refuses even the reduced letter stops the record with DLQ_REJECTED instead of waiting forever', async () => {
    let sends = 0;
    const { d } = deps(async () => {}, {
      sendDeadLetter: async () => {
        sends++;
        throw new KafkaJSProtocolError({ message: 'This record is invalid', type: 'INVALID_RECORD', code: 87, retriable: false } as never);
      },
    });
    await expect(routeOne('t', 0, message({ ...goodHeaders, eventType: 'Nope' }), d)).rejects.toMatchObject({ code: 'DLQ_REJECTED', retriable: false });
    expect(sends).toBe(2);
  });

  it('a DLQ write denied by an ACL is waited out until the ACL is granted: the full letter, never reduced, never DLQ_REJECTED', async () => {
    const sent: Message[] = [];
    const codes: unknown[] = [];
    const { d, stats } = deps(async () => {}, {
      sendDeadLetter: async (_topic, letter) => {
        if (codes.length < 3) throw new KafkaJSProtocolError({ message: 'Not authorized to access topics: [Topic authorization failed]', type: 'TOPIC_AUTHORIZATION_FAILED', code: 29, retriable: false } as never);
        sent.push(letter);
      },
      emit: (name, data) => void (name === 'router.wait' && codes.push(data.code)),
    });
    expect(await routeOne('t', 0, message({ ...goodHeaders, eventType: 'Nope' }), d)).toBe('dead-lettered');
    expect(stats.infrastructureRetries).toBe(3);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.headers).not.toHaveProperty('x-dead-letter-reduced');
  });

  it("a credential failure from the handler (through the toolkit's clients) is waited out like the database: no attempt counted, never dead-lettered", async () => {
    let calls = 0;
    const waits: Array<Record<string, unknown>> = [];
    const { d, letters, stats } = deps(
      async () => {
        if (++calls <= 4) throw new OutboxError('REGISTRY_AUTH_FAILED', 'The schema registry at https://r refused the credentials as "router"', { retriable: true, details: { hop: 'registry', principal: 'router' } });
      },
      { emit: (name, data) => void (name === 'router.wait' && waits.push(data)) },
    );
    expect(await routeOne('t', 0, message(goodHeaders), d)).toBe('applied');
    expect(letters).toHaveLength(0);
    expect(stats).toMatchObject({ infrastructureRetries: 4, retries: 0, applied: 1, deadLettered: 0 });
    expect(waits[0]).toMatchObject({ code: 'REGISTRY_AUTH_FAILED', hop: 'registry', principal: 'router' });
  });

  it('an inbox connection refused over the password waits as DB_AUTH_FAILED naming the role, never dead-letters', async () => {
    const refused = Object.assign(new DatabaseError('password authentication failed for user "outbox_router"', 0, 'error'), { code: '28P01' });
    const { pool } = fakePool();
    let refusals = 3;
    const connect = pool.connect.bind(pool);
    Object.assign(pool, { options: { host: 'db.internal', port: 5432, database: 'app', user: 'outbox_router' }, connect: async () => (refusals-- > 0 ? Promise.reject(refused) : connect()) });
    const waits: Array<Record<string, unknown>> = [];
    const { d, letters, stats } = deps(async () => {}, { pool, emit: (name, data) => void (name === 'router.wait' && waits.push(data)) });
    expect(await routeOne('t', 0, message(goodHeaders), d)).toBe('applied');
    expect(letters).toHaveLength(0);
    expect(stats).toMatchObject({ infrastructureRetries: 3, retries: 0, applied: 1 });
    expect(waits[0]).toMatchObject({ code: 'DB_AUTH_FAILED', hop: 'postgres', principal: 'outbox_router' });
    expect(String(waits[0]?.error)).toContain('db.internal:5432/app');
  });

  it('a tombstone (no value) is dead-lettered as RECORD_INVALID', async () => {
    const { d, letters } = deps(async () => {});
    const m = { ...message(goodHeaders), value: null };
    expect(await routeOne('t', 0, m, d)).toBe('dead-lettered');
    expect(letters[0]?.message.headers?.['x-error-code']).toBe('RECORD_INVALID');
  });
});
