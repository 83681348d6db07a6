import knex, { type Knex } from 'knex';
import type { PoolClient } from 'pg';
import { bindWriter, questionMarks, type ExecutorWriter, type OutboxExecutor, type TransactionWriter } from '../producer/executor';

/**
 * Knex (docs/adapters.md): the writer in a Knex transaction, and a Knex bound to a router handler's
 * inbox transaction. Loads Knex only (an optional peer dependency).
 */

const HINT = 'Call it inside knex.transaction(async (trx) => …) with that trx, or with a const trx = await knex.transaction() that has not committed.';

function knexExecutor(handle: Knex): OutboxExecutor {
  return {
    library: 'Knex',
    hint: HINT,
    // Knex's raw bindings are positional `?`; the writer's `$n` appear in order, each once.
    query: async (text, values): Promise<unknown> => handle.raw(questionMarks(text), [...values] as Knex.RawBinding[]),
    transactionState() {
      const trx = handle as { isTransaction?: boolean; isCompleted?: () => boolean };
      if (!trx?.isTransaction) return 'none';
      return typeof trx.isCompleted === 'function' && trx.isCompleted() ? 'ended' : 'open';
    },
  };
}

/** The writer through a Knex transaction `trx`: `await outbox.writeEvent(trx, event)`. A `knex` outside a transaction is refused. */
export function createKnexWriter<E>(writer: ExecutorWriter<E>): TransactionWriter<Knex, E> {
  return bindWriter(writer, knexExecutor);
}

const bound = new WeakMap<PoolClient, Knex>();

/**
 * A Knex (client 'pg') whose every query runs on `tx`, a router handler's `ctx.tx`, so it commits or
 * rolls back with the inbox row. One per pool client, kept while the client lives. Do not call its
 * transaction(): the router owns the transaction.
 */
export function knexOn(tx: PoolClient): Knex {
  let instance = bound.get(tx);
  if (!instance) {
    instance = knex({ client: 'pg' });
    // Knex takes and gives back a connection around each query: always this one, never into a pool of Knex's.
    const client = instance.client as { acquireConnection(): Promise<unknown>; releaseConnection(connection: unknown): Promise<void> };
    client.acquireConnection = async () => tx;
    client.releaseConnection = async () => {};
    bound.set(tx, instance);
  }
  return instance;
}
