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
  const ended = endedEvents(pool);
  const known = items.find((i) => ended.has(endedKey(consumer, i.id)));
  if (known) throw new HandlerFailed(handlerEndedTransaction(known.id));
  let client: PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw new InboxUnavailable(error);
  }
  let broken = false;
  /** The new inbox rows, until our own COMMIT is sent (after that, rows that exist are ours). */
  let uncommitted: ReadonlySet<string> = new Set();
  try {
    let inbox: { fresh: Set<string>; txid: string | undefined };
    try {
      await client.query('BEGIN');
      inbox = await insertInbox(client, inboxTable, consumer, items);
    } catch (error) {
      throw new InboxUnavailable(error);
    }
    const { fresh, txid } = inbox;
    const applied = new Set(fresh);
    uncommitted = applied;
    const results: ApplyResult[] = [];
    for (const [index, item] of items.entries()) {
      const isNew = fresh.delete(item.id.toLowerCase());
      if (isNew) {
        try {
          await withTimeout(item.run(client), options.handlerTimeoutMs, item.id);
        } catch (error) {
          throw new HandlerFailed(error);
        }
        // Free (no round trip): the last ReadyForQuery said the connection is outside any transaction.
        // Checked before afterInbox, which must never run outside the inbox transaction.
        if (transactionStatus(client) === 'I') {
          await endedTransaction(client, inboxTable, consumer, ended, items.slice(index), applied);
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
    // A handler that ran COMMIT and then BEGIN leaves a transaction open, but not ours: compare ids.
    if (txid !== undefined && transactionStatus(client) !== 'E') {
      let now: string | null;
      try {
        now = (await client.query<{ txid: string | null }>('SELECT txid_current_if_assigned()::text AS txid')).rows[0]?.txid ?? null;
      } catch (error) {
        throw new InboxUnavailable(error);
      }
      if (now !== txid) {
        // Which handler did it is unknown in a chunk: every new event of it is failed (loudly), none re-run.
        await endedTransaction(client, inboxTable, consumer, ended, items.length === 1 ? items : items.filter((i) => applied.has(i.id.toLowerCase())), applied, items.length > 1);
      }
    }
    let committed: { command: string };
    uncommitted = new Set();
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
    // A handler that ran COMMIT (then BEGIN) and then failed, or made the router's own statement fail,
    // committed inbox rows the rollback cannot take back: their retries would count them as duplicates.
    const ours = error instanceof HandlerFailed && isOutboxError(error.cause, 'HANDLER_ENDED_TRANSACTION');
    if (!ours && uncommitted.size > 0) {
      const survived = await committedRows(broken ? pool : client, inboxTable, consumer, uncommitted).catch((): string[] => []);
      if (survived.length > 0) {
        const rest = items.filter((i) => survived.includes(i.id.toLowerCase()));
        await endedTransaction(broken ? pool : client, inboxTable, consumer, endedEvents(pool), rest, uncommitted, true);
      }
    }
    throw error;
  } finally {
    client.release(broken);
  }
}

/**
 * The ReadyForQuery status pg last saw: 'I' idle (no transaction), 'T' in one, 'E' in a failed one.
 * undefined on a pg without it; the txid comparison before COMMIT still catches the handler then.
 */
function transactionStatus(client: PoolClient): string | undefined {
  const c = client as PoolClient & { getTransactionStatus?: () => string | null; _txStatus?: string | null };
  return (c.getTransactionStatus ? c.getTransactionStatus() : c._txStatus) ?? undefined;
}

/**
 * Per pool, `consumer id` keys of events whose handler ended the transaction. Their retries (the
 * one-by-one retry of a split chunk, or the `block` policy's) fail at once instead of running a handler
 * that commits on its own again; a restart (with the fixed handler) forgets them.
 */
const endedByPool = new WeakMap<Pool, Set<string>>();
const ENDED_MEMORY = 10_000;
const endedKey = (consumer: string, id: string) => `${consumer}\u0000${id}`;

function endedEvents(pool: Pool): Set<string> {
  let set = endedByPool.get(pool);
  if (!set) endedByPool.set(pool, (set = new Set()));
  return set;
}

function handlerEndedTransaction(id: string): OutboxError {
  return new OutboxError(
    'HANDLER_ENDED_TRANSACTION',
    `The handler of event ${id} (or a handler sharing its transaction) ended the router's transaction itself: it ran COMMIT or ROLLBACK on ctx.tx, or an ORM given ctx.tx did. ` +
      'Its writes may be partly committed outside the inbox transaction, and this router process fails the event at once from now on (it never re-runs such a handler). ' +
      'Let the router own the transaction (use savepoints for nested work), deploy the fix, check the effects, then replay.',
    { retriable: false, details: { id } },
  );
}

/**
 * A handler ended the transaction the router opened. `rest` starts with the event whose handler did it:
 * it is failed (not retried, never counted as applied), and the inbox rows of the events after it,
 * which its COMMIT may have committed without their effects, are deleted so they are applied again.
 * `unattributed`: the culprit is unknown, so every event of `rest` is failed and its row kept.
 */
async function endedTransaction(
  client: Pick<PoolClient, 'query'>,
  inboxTable: string,
  consumer: string,
  ended: Set<string>,
  rest: readonly InboxItem[],
  applied: ReadonlySet<string>,
  unattributed = false,
): Promise<never> {
  const [culprit, ...after] = rest;
  const failed = unattributed ? rest : culprit ? [culprit] : [];
  for (const item of failed) ended.add(endedKey(consumer, item.id));
  while (ended.size > ENDED_MEMORY) ended.delete(ended.values().next().value as string);
  // Every row this transaction wrote for the failed events and those after them goes, so the events
  // are applied again by a replay (after the fix, and after checking the culprit's partial effects).
  const lost = [...new Set((unattributed ? rest : [...failed, ...after]).filter((i) => applied.has(i.id.toLowerCase())).map((i) => i.id.toLowerCase()))];
  await client.query('ROLLBACK').catch(() => {});
  if (lost.length > 0) {
    try {
      await client.query(`DELETE FROM ${inboxTable} WHERE consumer = $1 AND message_id = ANY($2::uuid[])`, [consumer, lost]);
    } catch {
      // Cannot give them back: fail them too rather than let their retries count as duplicates.
      for (const id of lost) ended.add(endedKey(consumer, id));
    }
  }
  throw new HandlerFailed(handlerEndedTransaction((culprit as InboxItem).id));
}

/** Which of `ids` have an inbox row now, as seen from outside the (rolled-back) transaction. */
async function committedRows(db: Pick<Pool, 'query'>, inboxTable: string, consumer: string, ids: ReadonlySet<string>): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(`SELECT message_id::text AS id FROM ${inboxTable} WHERE consumer = $1 AND message_id = ANY($2::uuid[])`, [consumer, [...ids]]);
  return rows.map((r) => r.id.toLowerCase());
}

async function terminate(pool: Pool, client: PoolClient): Promise<void> {
  const pid = (client as PoolClient & { processID?: number }).processID;
  if (pid) await pool.query('SELECT pg_terminate_backend($1)', [pid]).catch(() => {});
}

/**
 * The new inbox rows, and the transaction id that wrote them (returned by the same statement: no extra
 * round trip). No new row: no handler runs, so no id is needed.
 */
async function insertInbox(client: PoolClient, inboxTable: string, consumer: string, items: readonly InboxItem[]): Promise<{ fresh: Set<string>; txid: string | undefined }> {
  const result = await client.query<{ message_id: string; txid: string }>(
    `INSERT INTO ${inboxTable} (consumer, message_id, processed_at) SELECT $1, id, now() FROM unnest($2::uuid[]) AS t(id) ON CONFLICT DO NOTHING RETURNING message_id::text, txid_current()::text AS txid`,
    [consumer, items.map((i) => i.id)],
  );
  return { fresh: new Set(result.rows.map((r) => r.message_id.toLowerCase())), txid: result.rows[0]?.txid };
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
