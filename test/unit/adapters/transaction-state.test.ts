/**
 * The transaction checks of the Prisma and pg-promise adapters (src/adapters) on handles shaped as each
 * library's: the shapes the integration tests cannot produce with the installed versions (a Prisma from
 * before nested transactions, a Prisma that drops its transaction scope). Nothing is queried unless the
 * handle is in an open transaction.
 */
import { createPgPromiseWriter } from '../../../src/adapters/pg-promise';
import { createPrismaWriter } from '../../../src/adapters/prisma';
import { loadConfig } from '../../../src/config';
import { createOutboxWriter, type OutboxEvent, type PayloadEncoder } from '../../../src/producer';
import { rejection } from '../../support/expect-error';

const SCOPE = Symbol.for('prisma.client.transaction.scope_context');
const codec: PayloadEncoder = { encode: async (_a, _t, payload) => Buffer.from(JSON.stringify(payload)) };
const writer = createOutboxWriter({ outbox: loadConfig({ env: {}, overrides: {} }).outbox, codec });
const event: OutboxEvent = { aggregateType: 'order', aggregateId: 'o-1', type: 'OrderPaid', payload: { cents: 1 } };

function prismaHandle(shape: { transaction?: boolean; scope?: unknown }) {
  const $executeRawUnsafe = jest.fn(async (_query: string, ..._values: unknown[]) => 1);
  const handle: Record<string | symbol, unknown> = { $executeRawUnsafe };
  if (shape.transaction) handle.$transaction = async () => undefined;
  if ('scope' in shape) handle[SCOPE] = shape.scope;
  return { $executeRawUnsafe, handle: handle as unknown as Parameters<ReturnType<typeof createPrismaWriter>['writeEvent']>[0] };
}

describe('Prisma adapter: which handles are in a transaction', () => {
  const outbox = createPrismaWriter(writer);
  const open = { kind: 'nested', txId: 't1', scopeId: 's1', scopeState: { stack: ['s1'] } };

  it.each([
    ['a transaction client with its scope open', { transaction: true, scope: open }],
    ['a transaction client of a Prisma before nested transactions (no scope, no $transaction)', {}],
  ])('writes through %s, with the payload bytes as a parameter', async (_name, shape) => {
    const { handle, $executeRawUnsafe } = prismaHandle(shape);
    await outbox.writeEvent(handle, event);
    expect($executeRawUnsafe).toHaveBeenCalledTimes(1);
    const [text, ...values] = $executeRawUnsafe.mock.calls[0] as [string, ...unknown[]];
    expect(text).toMatch(/^INSERT INTO .*\$1/);
    expect(values.filter((v) => Buffer.isBuffer(v))).toEqual([Buffer.from('{"cents":1}')]);
  });

  it.each([
    ['the root client (no scope, has $transaction)', { transaction: true }, /not inside a transaction/],
    ['a transaction client whose callback has returned (scope popped)', { transaction: true, scope: { ...open, scopeState: { stack: [] } } }, /already ended/],
    ['a scope of a shape this adapter does not know', { transaction: true, scope: { kind: 'something-else' } }, /already ended/],
  ])('refuses %s and runs nothing', async (_name, shape, message) => {
    const { handle, $executeRawUnsafe } = prismaHandle(shape);
    const error = await rejection(outbox.writeEvent(handle, event));
    expect([error.code, error.message]).toEqual(['NOT_IN_TRANSACTION', expect.stringMatching(message)]);
    expect(error.message).toContain('prisma.$transaction(async (tx)');
    expect($executeRawUnsafe).not.toHaveBeenCalled();
  });
});

describe('pg-promise adapter: which handles are in a transaction', () => {
  const outbox = createPgPromiseWriter(writer);
  const handle = (ctx?: object) => {
    const none = jest.fn(async (_query: { text: string; values: unknown[] }) => null);
    return { none, handle: { none, ...(ctx ? { ctx } : {}) } };
  };

  it('writes through a running transaction as a parameterized query', async () => {
    const { handle: t, none } = handle({ inTransaction: true });
    await outbox.writeEvent(t, event);
    expect(none).toHaveBeenCalledWith({ text: expect.stringMatching(/^INSERT INTO /), values: expect.arrayContaining([Buffer.from('{"cents":1}')]) });
  });

  it.each([
    ['the database object (no ctx)', undefined, /not inside a transaction/],
    ['a task (ctx, not in a transaction)', { inTransaction: false }, /not inside a transaction/],
    ['a transaction that has finished', { inTransaction: true, finish: new Date() }, /already ended/],
  ])('refuses %s and runs nothing', async (_name, ctx, message) => {
    const { handle: t, none } = handle(ctx);
    const error = await rejection(outbox.writeEvent(t, event));
    expect([error.code, error.message]).toEqual(['NOT_IN_TRANSACTION', expect.stringMatching(message)]);
    expect(none).not.toHaveBeenCalled();
  });
});
