import { bindWriter, type ExecutorWriter, type OutboxExecutor, type TransactionWriter } from '../producer/executor';

/**
 * pg-promise (docs/adapters.md): the writer in a pg-promise transaction, `db.tx(async (t) => …)`, given
 * that `t` (or a task inside it). Needs nothing of pg-promise at run time but the handle it is given.
 */

/** What the adapter uses of a pg-promise database, task or transaction: `none` and the task context. */
export interface PgPromiseHandle {
  none(query: { text: string; values: unknown[] }): Promise<null>;
  /** Only tasks and transactions have one; the database object does not. */
  readonly ctx?: { readonly inTransaction?: boolean; readonly finish?: Date };
}

const HINT = 'Call it inside db.tx(async (t) => …) with that t (a db.task has no transaction: use db.tx, or t.tx inside the task).';

function pgPromiseExecutor(handle: PgPromiseHandle): OutboxExecutor {
  return {
    library: 'pg-promise',
    hint: HINT,
    // { text, values } is pg-promise's ParameterizedQuery: the values go to the server as parameters
    // (the payload as bytea), not formatted into the SQL text.
    query: (text, values) => handle.none({ text, values: [...values] }),
    transactionState() {
      const ctx = handle?.ctx;
      if (typeof handle?.none !== 'function' || !ctx?.inTransaction) return 'none';
      // pg-promise sets finish when the task or transaction callback has completed.
      return ctx.finish ? 'ended' : 'open';
    },
  };
}

/** The writer through pg-promise: `await outbox.writeEvent(t, event)` inside `db.tx(async (t) => …)`. */
export function createPgPromiseWriter<E>(writer: ExecutorWriter<E>): TransactionWriter<PgPromiseHandle, E> {
  return bindWriter(writer, pgPromiseExecutor);
}
