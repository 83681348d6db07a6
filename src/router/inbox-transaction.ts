import type { Pool, PoolClient } from 'pg';
import { pgCode } from '../db';

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

/**
 * The exactly-once effect: the inbox row and the handler's writes commit in one transaction. A row
 * that already exists means the event was applied before (a redelivery): nothing runs. A concurrent
 * duplicate (two consumers during a rebalance) waits on the primary key and then finds the row.
 */
export async function applyOnce(pool: Pool, inboxTable: string, consumer: string, messageId: string, run: (tx: PoolClient) => Promise<void>): Promise<ApplyResult> {
  let client: PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw new InboxUnavailable(error);
  }
  let broken = false;
  try {
    let inserted: number | null;
    try {
      await client.query('BEGIN');
      const result = await client.query(`INSERT INTO ${inboxTable} (consumer, message_id, processed_at) VALUES ($1, $2, now()) ON CONFLICT DO NOTHING`, [
        consumer,
        messageId,
      ]);
      inserted = result.rowCount;
    } catch (error) {
      throw new InboxUnavailable(error);
    }
    if (inserted === 0) {
      await client.query('ROLLBACK').catch(() => {});
      return 'duplicate';
    }
    try {
      await run(client);
    } catch (error) {
      throw new HandlerFailed(error);
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
    return 'applied';
  } catch (error) {
    broken = error instanceof InboxUnavailable;
    await client.query('ROLLBACK').catch(() => {
      broken = true;
    });
    throw error;
  } finally {
    client.release(broken);
  }
}
