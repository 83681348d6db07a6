import type { Pool } from 'pg';

/** The uuids of a `'{…}'::uuid[]` literal the router inlines in its `BEGIN; INSERT …` simple query. */
export function inlinedIds(sql: string): string[] {
  const literal = /unnest\('\{([^}]*)\}'::uuid\[\]\)/.exec(sql)?.[1];
  return literal ? literal.split(',') : [];
}

/** A query's text, whether it came as a string or as a named statement ({ name, text, values }). */
export function textOf(query: string | { text: string }): string {
  return typeof query === 'string' ? query : query.text;
}

/**
 * A stand-in for the router's pool in unit tests: an in-memory inbox answering the router's own
 * statements (`BEGIN; INSERT … RETURNING message_id, txid` as one simple query, the closing check with
 * COMMIT as another, ROLLBACK) the way PostgreSQL would. Only for pure logic; the integration tests use the real
 * database. Remembers inbox ids that committed; fails the inbox INSERT `failInsert` times;
 * `commitCommand` fakes a COMMIT that rolled back. `log` has one entry per round trip (its first word;
 * `pool:` + it for one outside a transaction).
 */
export function fakePool(opts: { failInsert?: number; commitCommand?: string } = {}) {
  const inbox = new Set<string>();
  const log: string[] = [];
  let insertFailures = opts.failInsert ?? 0;
  const pool = {
    connect: async () => {
      let pending: string[] = [];
      return {
        query: async (query: string | { text: string }, params?: unknown[]) => {
          const sql = textOf(query);
          const verb = sql.split(/[ ;]/)[0] as string;
          log.push(verb);
          if (sql.startsWith('BEGIN; INSERT')) {
            if (insertFailures-- > 0) throw Object.assign(new Error('connection terminated'), {});
            const fresh = [...new Set(inlinedIds(sql))].filter((id) => !inbox.has(id));
            pending = fresh;
            return [{ command: 'BEGIN', rows: [] }, { command: 'INSERT', rowCount: fresh.length, rows: fresh.map((id) => ({ message_id: id, txid: '1' })) }];
          }
          if (verb === 'INSERT') throw new Error(`unexpected statement: ${sql} ${JSON.stringify(params)}`);
          // The router's closing check (the transaction is still the one it opened, no key parked since) with COMMIT behind it.
          if (sql.startsWith('SELECT 1 / (txid_current_if_assigned()') && sql.endsWith('; COMMIT')) {
            if (opts.commitCommand === 'ROLLBACK') return [{ command: 'SELECT', rows: [{ ours: 1 }] }, { command: 'ROLLBACK' }];
            for (const id of pending) inbox.add(id);
            return [{ command: 'SELECT', rows: [{ ours: 1 }] }, { command: 'COMMIT' }];
          }
          if (verb === 'COMMIT') {
            if (opts.commitCommand === 'ROLLBACK') return { command: 'ROLLBACK' };
            for (const id of pending) inbox.add(id);
            return { command: 'COMMIT' };
          }
          if (verb === 'ROLLBACK') pending = [];
          return { command: verb, rowCount: 0, rows: [] };
        },
        release: () => {},
      };
    },
    /** Statements outside a transaction (the parked keys' load, a park, ending a timed-out backend): no rows. */
    query: async (query: string | { text: string }) => {
      log.push(`pool:${textOf(query).split(' ')[0]}`);
      return { command: 'SELECT', rowCount: 0, rows: [] };
    },
  };
  return { pool: pool as unknown as Pool, inbox, log };
}
