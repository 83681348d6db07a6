import { CompiledQuery, Kysely, PostgresDialect, type KyselyConfig } from 'kysely';
import type { PoolClient } from 'pg';
import { bindWriter, type ExecutorWriter, type OutboxExecutor, type TransactionWriter } from '../producer/executor';

/**
 * Kysely (docs/adapters.md): the writer in a Kysely transaction, and a Kysely bound to a router
 * handler's inbox transaction. Loads Kysely only (an optional peer dependency).
 */

const HINT = 'Call it inside db.transaction().execute(async (trx) => …) with that trx, or with a db.startTransaction() that has not committed.';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyKysely = Kysely<any>;

function kyselyExecutor(handle: AnyKysely): OutboxExecutor {
  return {
    library: 'Kysely',
    hint: HINT,
    query: (text, values) => handle.executeQuery(CompiledQuery.raw(text, [...values])),
    transactionState() {
      if (!handle?.isTransaction) return 'none';
      // A controlled transaction (db.startTransaction()) says when it has ended.
      const controlled = handle as { isCommitted?: boolean; isRolledBack?: boolean };
      return controlled.isCommitted || controlled.isRolledBack ? 'ended' : 'open';
    },
  };
}

/** The writer through a Kysely transaction `trx`: `await outbox.writeEvent(trx, event)`. A `db` outside a transaction is refused. */
export function createKyselyWriter<E>(writer: ExecutorWriter<E>): TransactionWriter<AnyKysely, E> {
  return bindWriter(writer, kyselyExecutor);
}

/**
 * A Kysely whose every query runs on `tx` (a router handler's `ctx.tx`), so it commits or rolls back
 * with the inbox row. Do not call its transaction(): the router owns the transaction.
 */
export function kyselyOn<DB>(tx: PoolClient, config: Omit<KyselyConfig, 'dialect'> = {}): Kysely<DB> {
  // Kysely releases its connection after each query: the router's client must not go back to its pool.
  const connection = { query: tx.query.bind(tx), release() {} };
  return new Kysely<DB>({ ...config, dialect: new PostgresDialect({ pool: { connect: async () => connection as never, end: async () => {} } }) });
}
