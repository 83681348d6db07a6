import { OutboxError } from '../errors';
import type { WrittenEvent } from './writer';

/**
 * What the writer needs from another library's transaction handle (Kysely, Drizzle, Knex, postgres.js,
 * TypeORM, Sequelize, Prisma): run one statement in that transaction, and say whether there is one.
 * Each adapter (src/adapters) builds it in its library's idiom; any other library can too.
 */
export interface OutboxExecutor {
  /** Names the library and the handle in errors, e.g. "Kysely". */
  readonly library: string;
  /** How to get a handle that is inside a transaction, in the library's words: the fix of the refusal. */
  readonly hint: string;
  /** One statement with `$1…` placeholders (numbered in the order they appear), in the handle's transaction. */
  query(text: string, values: readonly unknown[]): Promise<unknown>;
  /**
   * 'open' when the handle is inside a transaction that can still commit; otherwise why not. From the
   * library's own transaction state where it has one (no round trip).
   */
  transactionState(): TransactionState | Promise<TransactionState>;
}

/** 'none': the handle autocommits; 'ended': its transaction has committed or rolled back. */
export type TransactionState = 'open' | 'none' | 'ended';

/**
 * Outside a transaction the INSERT would autocommit on its own and the event would be published even if
 * the business write later failed: the dual write the outbox exists to prevent.
 */
export async function assertExecutorInTransaction(executor: OutboxExecutor): Promise<void> {
  const state = await executor.transactionState();
  if (state === 'open') return;
  throw new OutboxError(
    'NOT_IN_TRANSACTION',
    state === 'ended'
      ? `writeEvent was given a ${executor.library} transaction that has already ended (committed or rolled back); nothing was written. ${executor.hint}`
      : `writeEvent was given a ${executor.library} handle that is not inside a transaction, so the event would commit on its own, without the business rows; nothing was written. ${executor.hint}`,
    { details: { library: executor.library, state } },
  );
}

/** A writer bound to one library: the same events (and EventMap types) as the writer, through that library's handle. */
export interface TransactionWriter<H, E> {
  /** Adds one event to the transaction of `handle`. Never begins or commits. */
  writeEvent(handle: H, event: E): Promise<WrittenEvent>;
  /** Adds several events in one statement; all or nothing. */
  writeEvents(handle: H, events: readonly E[]): Promise<WrittenEvent[]>;
}

/** What an adapter needs of a writer: `OutboxWriter` has it. */
export interface ExecutorWriter<E> {
  writeEventsVia(executor: OutboxExecutor, events: readonly E[]): Promise<WrittenEvent[]>;
}

/** The one way every adapter turns a writer and its library's executor into a TransactionWriter. */
export function bindWriter<H, E>(writer: ExecutorWriter<E>, executorFor: (handle: H) => OutboxExecutor): TransactionWriter<H, E> {
  if (typeof writer?.writeEventsVia !== 'function') {
    throw new OutboxError('CONFIG_INVALID', 'An outbox adapter takes the writer of createOutboxWriter (outbox-router/producer); got something else.');
  }
  return {
    async writeEvent(handle, event) {
      const [written] = await writer.writeEventsVia(executorFor(handle), [event]);
      return written as WrittenEvent;
    },
    writeEvents: (handle, events) => writer.writeEventsVia(executorFor(handle), events),
  };
}

/**
 * `$1…$n` (in order of appearance, each once, as the writer's statements have them) to `?`: for
 * libraries whose raw queries take positional `?` bindings (Knex).
 */
export function questionMarks(text: string): string {
  return text.replace(/\$\d+/g, '?');
}
