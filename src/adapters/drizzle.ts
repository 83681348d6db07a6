import { sql, type SQL } from 'drizzle-orm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import type { DrizzleConfig } from 'drizzle-orm/utils';
import type { PoolClient } from 'pg';
import { bindWriter, type ExecutorWriter, type OutboxExecutor, type TransactionWriter } from '../producer/executor';

/**
 * Drizzle (docs/adapters.md), on either PostgreSQL driver (node-postgres or postgres.js): the writer in
 * a Drizzle transaction, and a Drizzle bound to a router handler's inbox transaction. Loads Drizzle only.
 */

const HINT = 'Call it inside db.transaction(async (tx) => …) with that tx.';

/** What the adapter uses of a Drizzle database or transaction (PgDatabase of any driver). */
export interface DrizzleHandle {
  execute(query: SQL): PromiseLike<unknown>;
}

/** `$1…` text and its values as a Drizzle SQL object: Drizzle numbers the parameters again, in the same order. */
function toSql(text: string, values: readonly unknown[]): SQL {
  const pieces = text.split(/\$\d+/);
  const chunks: SQL[] = [];
  pieces.forEach((piece, i) => {
    chunks.push(sql.raw(piece));
    if (i < values.length) chunks.push(sql`${values[i]}`);
  });
  return sql.join(chunks);
}

function drizzleExecutor(handle: DrizzleHandle): OutboxExecutor {
  return {
    library: 'Drizzle',
    hint: HINT,
    query: async (text, values) => handle.execute(toSql(text, values)),
    // A PgTransaction (whatever the driver) has rollback(); a PgDatabase has not.
    transactionState: () => (typeof (handle as { rollback?: unknown })?.rollback === 'function' ? 'open' : 'none'),
  };
}

/** The writer through a Drizzle transaction `tx`: `await outbox.writeEvent(tx, event)`. A `db` outside a transaction is refused. */
export function createDrizzleWriter<E>(writer: ExecutorWriter<E>): TransactionWriter<DrizzleHandle, E> {
  return bindWriter(writer, drizzleExecutor);
}

/**
 * A Drizzle (node-postgres driver, the same pg-core schema) whose queries run on `tx`, a router handler's
 * `ctx.tx`: they commit or roll back with the inbox row. Do not call its transaction(): the router owns it.
 */
export function drizzleOn<TSchema extends Record<string, unknown> = Record<string, never>>(tx: PoolClient, config: DrizzleConfig<TSchema> = {}): NodePgDatabase<TSchema> {
  return drizzle({ ...config, client: tx });
}
