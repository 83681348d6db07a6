import type { Pool, PoolClient } from 'pg';
import { pgCode } from '../db';
import { isOutboxError, OutboxError } from '../errors';

export type ApplyResult = 'applied' | 'duplicate';

/**
 * A failure of the database around the handler (connect, BEGIN, the inbox INSERT, a lost COMMIT): not
 * the record's fault, so the router waits and tries again without counting it against the record.
 */
export class InboxUnavailable extends Error {
  constructor(override readonly cause: unknown) {
    super(`The inbox transaction failed: ${(cause as Error)?.message ?? String(cause)}`);
    this.name = 'InboxUnavailable';
  }
}

/** The handler (or the COMMIT of its writes) failed: counts as one failed attempt of the record. */
export class HandlerFailed extends Error {
  constructor(override readonly cause: unknown) {
    super((cause as Error)?.message ?? String(cause));
    this.name = 'HandlerFailed';
  }
}

/** At COMMIT, integrity (23…) and serialization (40…) errors come from the handler's writes. */
const handlerCommitClasses = ['23', '40'];

/** One event to apply: its inbox key and the handler call bound to it. */
export interface InboxItem {
  id: string;
  run(tx: PoolClient): Promise<void>;
  /** Runs in the same transaction whether the event is new or a duplicate (e.g. releasing a parked key). */
  afterInbox?(tx: PoolClient): Promise<void>;
}

export interface ApplyOptions {
  /** A handler that takes longer fails this attempt; its connection is closed, cancelling its statement. */
  handlerTimeoutMs?: number;
}

/**
 * The exactly-once effect: the inbox row and the handler's writes commit in one transaction. A row
 * that already exists means the event was applied before (a redelivery): nothing runs. A concurrent
 * duplicate (two consumers during a rebalance) waits on the primary key and then finds the row.
 */
export async function applyOnce(
  pool: Pool,
  inboxTable: string,
  consumer: string,
  messageId: string,
  run: (tx: PoolClient) => Promise<void>,
  options: ApplyOptions & { afterInbox?: (tx: PoolClient) => Promise<void> } = {},
): Promise<ApplyResult> {
  const [result] = await applyMany(pool, inboxTable, consumer, [{ id: messageId, run, afterInbox: options.afterInbox }], options);
  return result as ApplyResult;
}

/**
 * Several events of one partition in ONE transaction: one INSERT … RETURNING for all inbox rows, then
 * the handlers of the new ones in order, one COMMIT. Either all commit or none does; the caller falls
 * back to one transaction per event when a chunk fails, so one bad event costs its neighbours only a
 * second try. An id twice in one chunk is applied once: the second is a duplicate.
 */
export async function applyMany(pool: Pool, inboxTable: string, consumer: string, items: readonly InboxItem[], options: ApplyOptions = {}): Promise<ApplyResult[]> {
  let client: PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw new InboxUnavailable(error);
  }
  let broken = false;
  try {
    let fresh: Set<string>;
    try {
      await client.query('BEGIN');
      fresh = await insertInbox(client, inboxTable, consumer, items);
    } catch (error) {
      throw new InboxUnavailable(error);
    }
    const results: ApplyResult[] = [];
    for (const item of items) {
      const isNew = fresh.delete(item.id);
      if (isNew) {
        try {
          await withTimeout(item.run(client), options.handlerTimeoutMs, item.id);
        } catch (error) {
          throw new HandlerFailed(error);
        }
      }
      if (item.afterInbox) {
        try {
          await item.afterInbox(client);
        } catch (error) {
          throw new InboxUnavailable(error);
        }
      }
      results.push(isNew ? 'applied' : 'duplicate');
    }
    if (results.every((r) => r === 'duplicate') && !items.some((i) => i.afterInbox)) {
      await client.query('ROLLBACK').catch(() => {});
      return results;
    }
    let committed: { command: string };
    try {
      committed = await client.query('COMMIT');
    } catch (error) {
      const code = pgCode(error);
      throw code && handlerCommitClasses.includes(code.slice(0, 2)) ? new HandlerFailed(error) : new InboxUnavailable(error);
    }
    // COMMIT of a transaction the handler let fail (it caught an SQL error) silently rolls back.
    if (committed.command === 'ROLLBACK') {
      throw new HandlerFailed(new Error('The handler left its transaction aborted (an SQL error it caught), so nothing was committed.'));
    }
    return results;
  } catch (error) {
    // A timed-out handler may still be running a statement, holding its locks (the inbox row too, which
    // the retry needs): end its backend from another connection, then drop this one.
    const timedOut = error instanceof HandlerFailed && isOutboxError(error.cause, 'HANDLER_TIMEOUT');
    if (timedOut) await terminate(pool, client);
    broken = error instanceof InboxUnavailable || timedOut;
    if (!broken) {
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
    }
    throw error;
  } finally {
    client.release(broken);
  }
}

async function terminate(pool: Pool, client: PoolClient): Promise<void> {
  const pid = (client as PoolClient & { processID?: number }).processID;
  if (pid) await pool.query('SELECT pg_terminate_backend($1)', [pid]).catch(() => {});
}

async function insertInbox(client: PoolClient, inboxTable: string, consumer: string, items: readonly InboxItem[]): Promise<Set<string>> {
  if (items.length === 1) {
    const result = await client.query(`INSERT INTO ${inboxTable} (consumer, message_id, processed_at) VALUES ($1, $2, now()) ON CONFLICT DO NOTHING`, [
      consumer,
      (items[0] as InboxItem).id,
    ]);
    return new Set(result.rowCount ? [(items[0] as InboxItem).id] : []);
  }
  const result = await client.query<{ message_id: string }>(
    `INSERT INTO ${inboxTable} (consumer, message_id, processed_at) SELECT $1, id, now() FROM unnest($2::uuid[]) AS t(id) ON CONFLICT DO NOTHING RETURNING message_id`,
    [consumer, items.map((i) => i.id)],
  );
  return new Set(result.rows.map((r) => r.message_id));
}

async function withTimeout<T>(work: Promise<T>, ms: number | undefined, id: string): Promise<T> {
  if (!ms) return work;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new OutboxError('HANDLER_TIMEOUT', `The handler of event ${id} did not finish within ${ms} ms (handlerTimeoutMs); its transaction was rolled back and will be retried.`, { retriable: true })),
      ms,
    );
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
