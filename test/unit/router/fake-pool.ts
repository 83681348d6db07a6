import type { Pool } from 'pg';

/**
 * A stand-in for the router's pool in unit tests: an in-memory inbox answering the router's own
 * statements (BEGIN, the inbox INSERT … RETURNING message_id, txid, the transaction check, COMMIT,
 * ROLLBACK) the way PostgreSQL would. Only for pure logic; the integration tests use the real database.
 */
/** Remembers inbox ids that committed; fails the inbox INSERT `failInsert` times; `commitCommand` fakes a COMMIT that rolled back. */
export function fakePool(opts: { failInsert?: number; commitCommand?: string } = {}) {
  const inbox = new Set<string>();
  const log: string[] = [];
  let insertFailures = opts.failInsert ?? 0;
  const pool = {
    connect: async () => {
      let pending: string | undefined;
      return {
        query: async (sql: string, params?: unknown[]) => {
          const verb = sql.split(' ')[0] as string;
          log.push(verb);
          if (verb === 'INSERT') {
            if (insertFailures-- > 0) throw Object.assign(new Error('connection terminated'), {});
            const id = String(params?.[1]);
            if (inbox.has(id)) return { rowCount: 0, rows: [] };
            pending = id;
            return { rowCount: 1, rows: [{ message_id: id, txid: '1' }] };
          }
          // The router's check that the transaction is still the one it opened.
          if (sql.startsWith('SELECT txid_current_if_assigned()')) return { command: 'SELECT', rows: [{ txid: '1' }] };
          if (verb === 'COMMIT') {
            if (opts.commitCommand === 'ROLLBACK') return { command: 'ROLLBACK' };
            if (pending) inbox.add(pending);
            return { command: 'COMMIT' };
          }
          if (verb === 'ROLLBACK') pending = undefined;
          return { command: verb, rowCount: 0 };
        },
        release: () => {},
      };
    },
  };
  return { pool: pool as unknown as Pool, inbox, log };
}
