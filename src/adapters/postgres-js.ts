import type { Sql, TransactionSql } from 'postgres';
import { bindWriter, type ExecutorWriter, type OutboxExecutor, type TransactionWriter } from '../producer/executor';

/**
 * postgres.js (docs/adapters.md): the writer in a `sql.begin` transaction. Needs nothing of postgres.js
 * at run time but the handle it is given. A router handler's ctx.tx is a node-postgres client, so the
 * handler side has no postgres.js handle: see docs/adapters.md.
 */

const HINT = 'Call it inside sql.begin(async (sql) => …) with that transaction sql.';

/** What the adapter uses of a postgres.js `sql`: its unsafe() query, and savepoint(), which only a transaction's `sql` has. */
type PostgresJsHandle = Pick<Sql, 'unsafe'> | TransactionSql;

function postgresJsExecutor(handle: PostgresJsHandle): OutboxExecutor {
  return {
    library: 'postgres.js',
    hint: HINT,
    // postgres.js sends a Buffer as bytea; the statement gives every other parameter its column's type.
    // Prepared: the writer sends a few fixed statement shapes, and unsafe() would otherwise parse and
    // describe each one again on every call.
    query: async (text, values) => handle.unsafe(text, [...values] as never[], { prepare: true }),
    transactionState: () => (typeof (handle as Partial<TransactionSql>)?.savepoint === 'function' ? 'open' : 'none'),
  };
}

/** The writer through postgres.js: `await outbox.writeEvent(sql, event)` inside `sql.begin(async (sql) => …)`; the root `sql` is refused. */
export function createPostgresJsWriter<E>(writer: ExecutorWriter<E>): TransactionWriter<PostgresJsHandle, E> {
  return bindWriter(writer, postgresJsExecutor);
}
