import { bindWriter, type ExecutorWriter, type OutboxExecutor, type TransactionWriter } from '../producer/executor';

/**
 * Prisma 7 (docs/adapters.md): the writer in an interactive transaction, `prisma.$transaction(async (tx) => …)`,
 * given the transaction client `tx`. Needs nothing of Prisma at run time but that client: any generated
 * client (extended or not) on a driver adapter such as @prisma/adapter-pg.
 */

/** What the adapter uses of a Prisma client: its raw statement call. */
export interface PrismaTransactionClient {
  $executeRawUnsafe(query: string, ...values: unknown[]): PromiseLike<number>;
}

const HINT = 'Call it inside prisma.$transaction(async (tx) => …) with that tx (the array form of $transaction has no transaction client).';

/**
 * Prisma keeps, on each interactive transaction's client, the scope of that transaction: its id and the
 * stack of transactions still open on it (nested ones too), popped when the callback returns.
 */
const SCOPE = Symbol.for('prisma.client.transaction.scope_context');

interface TransactionScope {
  scopeId: unknown;
  scopeState: { stack: unknown[] };
}

function isScope(value: unknown): value is TransactionScope {
  const stack = (value as TransactionScope | undefined)?.scopeState?.stack;
  return Array.isArray(stack);
}

function prismaExecutor(handle: PrismaTransactionClient): OutboxExecutor {
  return {
    library: 'Prisma',
    hint: HINT,
    // $1… placeholders are PostgreSQL's own, which Prisma passes through; the payload goes as bytes (bytea).
    query: async (text, values) => handle.$executeRawUnsafe(text, ...values),
    transactionState() {
      if (typeof handle?.$executeRawUnsafe !== 'function') return 'none';
      const scope = (handle as unknown as Record<symbol, unknown>)[SCOPE];
      if (scope !== undefined) return isScope(scope) && scope.scopeState.stack.includes(scope.scopeId) ? 'open' : 'ended';
      // No scope: the root client (it has $transaction). Prisma before nested transactions had no scope,
      // and its transaction client was the one without $transaction. A Prisma that drops the scope and
      // keeps $transaction on transaction clients is refused: closed, never an autocommitted event.
      return typeof (handle as { $transaction?: unknown }).$transaction === 'function' ? 'none' : 'open';
    },
  };
}

/** The writer through Prisma: `await outbox.writeEvent(tx, event)` inside `prisma.$transaction(async (tx) => …)`. */
export function createPrismaWriter<E>(writer: ExecutorWriter<E>): TransactionWriter<PrismaTransactionClient, E> {
  return bindWriter(writer, prismaExecutor);
}
