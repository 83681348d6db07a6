import type { Pool } from 'pg';
import { isOutboxError } from '../../../src/errors';
import { applyMany, HandlerFailed } from '../../../src/router/inbox-transaction';
import { inlinedIds, textOf } from './fake-pool';

/**
 * A client that keeps pg's ReadyForQuery transaction status (`_txStatus`) the way a server would:
 * 'T' after BEGIN, 'I' after COMMIT or ROLLBACK. Only for the order of the router's own steps.
 */
function statusPool() {
  const statements: string[] = [];
  const client = {
    _txStatus: 'I' as string,
    query: async (query: string | { text: string }) => {
      const sql = textOf(query);
      statements.push(sql.split(/[ ;]/)[0] as string);
      if (sql.startsWith('BEGIN')) client._txStatus = 'T';
      if (sql === 'COMMIT' || sql === 'ROLLBACK') client._txStatus = 'I';
      if (sql.startsWith('BEGIN; INSERT')) return [{ rows: [] }, { rows: inlinedIds(sql).map((id) => ({ message_id: id, txid: '7' })) }];
      if (sql.startsWith('SELECT message_id')) return { rows: [] };
      return { command: sql.split(' ')[0], rows: [{ txid: '7' }] };
    },
    release: () => {},
  };
  return { pool: { connect: async () => client, query: client.query } as unknown as Pool, statements };
}

describe('applyMany: a handler that ends the transaction', () => {
  it('is caught before afterInbox runs, so a parked-key release never runs outside the inbox transaction', async () => {
    const { pool } = statusPool();
    let afterInboxRan = false;
    const error = await applyMany(pool, 'inbox', 'c', [
      { id: '0b7e3c1c-8a63-4c9a-9a51-0d2a8c1f5e77' },
    ], {
      calls: (fresh) => fresh.map((item) => ({ items: [item], run: async (tx) => void (await tx.query('COMMIT')) })),
      afterInbox: async () => void (afterInboxRan = true),
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(HandlerFailed);
    expect(isOutboxError((error as HandlerFailed).cause, 'HANDLER_ENDED_TRANSACTION')).toBe(true);
    expect(afterInboxRan).toBe(false);
  });
});
