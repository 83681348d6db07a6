import { escapeLiteral, type Pool, type PoolClient, type QueryResult } from 'pg';
import { inboxIdType, inboxKeyFunction, pgCode, uuidInboxRefuses } from '../db';
import { isUuid } from '../envelope';
import { isOutboxError, OutboxError } from '../errors';
import { missingPartition } from './inbox-partitions';
import { CHECK_NOT_OURS, CHECK_PARKED, checkFailure, closingStatement, parkedNow, type ClosingGuard } from './closing-check';

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
 * An error of COMMIT: the handler's (its writes broke a deferred constraint, could not be serialized, or
 * a deferred trigger of its tables raised something, which carries the trigger's context in `where`),
 * or the database's (the connection, the server going away, a full disk), which is waited out.
 */
function commitFailure(error: unknown): HandlerFailed | InboxUnavailable {
  const code = pgCode(error);
  const fromHandler = (code !== undefined && handlerCommitClasses.includes(code.slice(0, 2))) || Boolean((error as { where?: string }).where);
  return fromHandler ? new HandlerFailed(error) : new InboxUnavailable(error);
}

/** One event to apply: its inbox key. */
export interface InboxItem {
  id: string;
}

/** One handler call: consecutive fresh items of the chunk, in offset order. */
export interface HandlerCall<T extends InboxItem> {
  items: readonly T[];
  run(tx: PoolClient): Promise<void>;
}

export interface ApplyOptions<T extends InboxItem = InboxItem> {
  /** A handler call that takes longer fails this attempt; its connection is closed, cancelling its statement. */
  handlerTimeoutMs?: number;
  /** The handler calls for the fresh items (after inbox dedup), in order; every fresh item in exactly one call. */
  calls?(fresh: readonly T[]): ReadonlyArray<HandlerCall<T>>;
  /** Runs in the same transaction whether the events are new or duplicates (e.g. releasing a parked key). */
  afterInbox?(tx: PoolClient): Promise<void>;
  /** Checked in the statement before COMMIT that also checks the transaction is still ours. */
  guard?: ClosingGuard;
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
  options: Omit<ApplyOptions, 'calls'> = {},
): Promise<ApplyResult> {
  const [result] = await applyMany(pool, inboxTable, consumer, [{ id: messageId }], { ...options, calls: (fresh) => fresh.map((item) => ({ items: [item], run })) });
  return result as ApplyResult;
}

/**
 * Several events of one partition in ONE transaction, in a constant number of the router's own round
 * trips whatever their number: `BEGIN; INSERT … RETURNING` (one simple query), the handler calls of the
 * new events in order, one closing check (the transaction is still ours, no key parked since the
 * batch loaded), COMMIT. Either all commit or none does; the caller falls back to one transaction per
 * event when a chunk fails, so one bad event costs its neighbours only a second try. An id twice in one
 * chunk is applied once: the second is a duplicate.
 */
export async function applyMany<T extends InboxItem>(pool: Pool, inboxTable: string, consumer: string, items: readonly T[], options: ApplyOptions<T> = {}): Promise<ApplyResult[]> {
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
  /** The guard found a key parked since the load: the connection is fine, only the transaction goes. */
  let stale = false;
  /** The new inbox rows, until our own COMMIT is sent (after that, rows that exist are ours). */
  let uncommitted: ReadonlySet<string> = new Set();
  /** The id of the transaction that inserted them: only rows it wrote can have survived our rollback. */
  let insertTxid: string | undefined;
  const clock = new HandlerClock(options.handlerTimeoutMs);
  try {
    let inbox: { fresh: Set<string>; txid: string | undefined };
    try {
      inbox = await beginAndInsert(pool, client, inboxTable, consumer, items);
    } catch (error) {
      throw new InboxUnavailable(error);
    }
    const { fresh, txid } = inbox;
    insertTxid = txid;
    const applied: ReadonlySet<string> = new Set(fresh);
    uncommitted = applied;
    const results: ApplyResult[] = items.map((item) => (fresh.delete(inboxKey(item.id)) ? 'applied' : 'duplicate'));
    const freshItems = items.filter((_, i) => results[i] === 'applied');
    for (const call of options.calls?.(freshItems) ?? []) {
      try {
        await clock.time(call.run(client), (call.items[0] as T).id);
      } catch (error) {
        throw new HandlerFailed(error);
      }
      // Free (no round trip): the last ReadyForQuery said the connection is outside any transaction.
      // Checked before afterInbox, which must never run outside the inbox transaction.
      if (transactionStatus(client) === 'I') {
        const from = items.indexOf(call.items[0] as T);
        await endedTransaction(client, inboxTable, consumer, ended, call.items, items.slice(from), applied);
      }
    }
    clock.stop();
    if (options.afterInbox) {
      try {
        await options.afterInbox(client);
      } catch (error) {
        throw new InboxUnavailable(error);
      }
    }
    if (freshItems.length === 0 && !options.afterInbox) {
      await client.query('ROLLBACK').catch(() => {});
      return results;
    }
    let committed: { command: string };
    if (txid !== undefined && transactionStatus(client) !== 'E') {
      // The closing check and COMMIT in ONE simple query (one round trip): the check fails the
      // transaction when it is not ours any more or a key was parked since the load, and the server then
      // skips the COMMIT behind it.
      let closing: QueryResult[];
      try {
        closing = (await client.query(closingStatement(txid, options.guard))) as unknown as QueryResult[];
      } catch (error) {
        const code = checkFailure(error);
        if (code === CHECK_NOT_OURS) {
          // A handler ran COMMIT or ROLLBACK and then BEGIN: the open transaction is not ours. Which handler
          // did it is unknown in a chunk: every new event of it is failed (loudly), none re-run.
          const suspects = items.length === 1 ? items : freshItems;
          await endedTransaction(client, inboxTable, consumer, ended, suspects, suspects, applied);
        }
        if (code === CHECK_PARKED && options.guard) {
          stale = true;
          await client.query('ROLLBACK').catch(() => {});
          const parked = await parkedNow(client, options.guard).catch((): string[] => []);
          throw new InboxUnavailable(options.guard.stale(parked));
        }
        // The COMMIT itself failed (or the connection did, maybe after it): nothing is known to be ours.
        uncommitted = new Set();
        throw commitFailure(error);
      }
      uncommitted = new Set();
      committed = closing[closing.length - 1] as QueryResult;
    } else {
      uncommitted = new Set();
      try {
        committed = await client.query('COMMIT');
      } catch (error) {
        throw commitFailure(error);
      }
    }
    // COMMIT of a transaction the handler let fail (it caught an SQL error) silently rolls back.
    if (committed.command === 'ROLLBACK') {
      throw new HandlerFailed(new Error('The handler left its transaction aborted (an SQL error it caught), so nothing was committed.'));
    }
    return results;
  } catch (error) {
    clock.stop();
    // A timed-out handler may still be running a statement, holding its locks (the inbox row too, which
    // the retry needs): end its backend from another connection, then drop this one.
    const timedOut = error instanceof HandlerFailed && isOutboxError(error.cause, 'HANDLER_TIMEOUT');
    if (timedOut) await terminate(pool, client);
    broken = (error instanceof InboxUnavailable && !stale) || timedOut;
    if (!broken) {
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
    }
    // A handler that ran COMMIT (then BEGIN) and then failed, or made the router's own statement fail,
    // committed inbox rows the rollback cannot take back: their retries would count them as duplicates.
    const ours = error instanceof HandlerFailed && isOutboxError(error.cause, 'HANDLER_ENDED_TRANSACTION');
    if (!ours && uncommitted.size > 0 && insertTxid !== undefined) {
      const survived = await committedRows(broken ? pool : client, inboxTable, consumer, uncommitted, insertTxid).catch((): string[] => []);
      if (survived.length > 0) {
        const rest = items.filter((i) => survived.includes(inboxKey(i.id)));
        await endedTransaction(broken ? pool : client, inboxTable, consumer, endedEvents(pool), rest, rest, uncommitted);
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
 * A handler ended the transaction the router opened. `failed` are the events of the handler call that
 * did it (every new event of the chunk when the culprit is unknown): they are failed (not retried,
 * never counted as applied). The inbox rows of `rest` (from the culprit on), which its COMMIT may have
 * committed without their effects, are deleted so they are applied again.
 */
async function endedTransaction(
  client: Pick<PoolClient, 'query'>,
  inboxTable: string,
  consumer: string,
  ended: Set<string>,
  failed: readonly InboxItem[],
  rest: readonly InboxItem[],
  applied: ReadonlySet<string>,
): Promise<never> {
  for (const item of failed) ended.add(endedKey(consumer, item.id));
  while (ended.size > ENDED_MEMORY) ended.delete(ended.values().next().value as string);
  // Every row this transaction wrote for the failed events and those after them goes, so the events
  // are applied again by a replay (after the fix, and after checking the culprit's partial effects).
  const lost = [...new Set(rest.filter((i) => applied.has(inboxKey(i.id))).map((i) => inboxKey(i.id)))];
  await client.query('ROLLBACK').catch(() => {});
  if (lost.length > 0) {
    try {
      await client.query(`DELETE FROM ${inboxTable} WHERE consumer = $1 AND message_id = ANY($2)`, [consumer, lost]);
    } catch {
      // Cannot give them back: fail them too rather than let their retries count as duplicates.
      for (const id of lost) ended.add(endedKey(consumer, id));
    }
  }
  throw new HandlerFailed(handlerEndedTransaction((failed[0] as InboxItem).id));
}

/**
 * Which of `ids` have an inbox row now that OUR transaction `txid` wrote, as seen after its rollback:
 * rows a handler's own COMMIT let through. A row of another router (the rebalance gave it the
 * partition, and its INSERT waited on ours until the rollback) is not ours: counting it failed good
 * events as HANDLER_ENDED_TRANSACTION and deleted that router's rows, so a replay applied them twice.
 * xmin is the 32-bit xid; txid_current() is the same id with its epoch above bit 32.
 */
async function committedRows(db: Pick<Pool, 'query'>, inboxTable: string, consumer: string, ids: ReadonlySet<string>, txid: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT message_id::text AS id FROM ${inboxTable} WHERE consumer = $1 AND message_id = ANY($2) AND xmin::text::bigint = $3::bigint % 4294967296`,
    [consumer, [...ids], txid],
  );
  return rows.map((r) => inboxKey(r.id));
}

async function terminate(pool: Pool, client: PoolClient): Promise<void> {
  const pid = (client as PoolClient & { processID?: number }).processID;
  if (pid) await pool.query('SELECT pg_terminate_backend($1)', [pid]).catch(() => {});
}

/**
 * An event's inbox key as the inbox returns it: a UUID in lower case (the uuid column's text form), any
 * other id exactly as given (a text id's case is part of it).
 */
function inboxKey(id: string): string {
  return isUuid(id) ? id.toLowerCase() : id;
}

/**
 * BEGIN, then the new inbox rows and the transaction id that wrote them (RETURNING: no extra round
 * trip). Both go in ONE simple query, which takes no parameters: the ids are inlined only when every
 * one is a UUID (as this project's events are; into a text column too), the consumer as an escaped
 * literal; otherwise two round trips with parameters, as text (migration 013: an inbox still on uuid
 * ids refuses them first). No new row: no handler runs, so no id is needed.
 */
async function beginAndInsert(pool: Pool, client: PoolClient, inboxTable: string, consumer: string, items: readonly InboxItem[]): Promise<{ fresh: Set<string>; txid: string | undefined }> {
  // Keys, not ids as given: a UUID in upper case beside a text id takes the text path, where only this
  // lower-casing makes it the same key as the uuid path's (found by inbox-text-ids.test.ts).
  const ids = items.map((i) => inboxKey(i.id));
  // An inbox of migration 016 is keyed by message_ms too, a function of message_id: one catalog query per
  // pool and table finds the function (before 016: none, and the INSERT is as before). On this client: a
  // second connection of the pool could wait for ours (a pool of one).
  const keyFn = await inboxKeyFunction(client, inboxTable, pool);
  const insert = (consumerSql: string, idsSql: string) =>
    `INSERT INTO ${inboxTable} (consumer, message_id, processed_at${keyFn ? ', message_ms' : ''}) SELECT ${consumerSql}, id, now()${keyFn ? `, ${keyFn}(id::text)` : ''} ` +
    `FROM unnest(${idsSql}) AS t(id) ON CONFLICT DO NOTHING RETURNING message_id::text, txid_current()::text AS txid`;
  try {
    return await insertRows(client, inboxTable, consumer, ids, insert);
  } catch (error) {
    if (pgCode(error) === '23514') await missingPartition(pool, client, inboxTable, ids, keyFn, error as Error);
    throw error;
  }
}

async function insertRows(
  client: PoolClient,
  inboxTable: string,
  consumer: string,
  ids: string[],
  insert: (consumerSql: string, idsSql: string) => string,
): Promise<{ fresh: Set<string>; txid: string | undefined }> {
  let rows: Array<{ message_id: string; txid: string }>;
  if (ids.every(isUuid)) {
    const results = (await client.query(`BEGIN; ${insert(escapeLiteral(consumer), `'{${ids.join(',')}}'::uuid[]`)}`)) as unknown as Array<QueryResult<{ message_id: string; txid: string }>>;
    rows = (results[1] as QueryResult<{ message_id: string; txid: string }>).rows;
  } else {
    const other = ids.find((id) => !isUuid(id)) as string;
    if ((await inboxIdType(client, inboxTable)) === 'uuid') throw uuidInboxRefuses(other, inboxTable);
    await client.query('BEGIN');
    rows = (await client.query<{ message_id: string; txid: string }>(insert('$1', '$2::text[]'), [consumer, ids])).rows;
  }
  return { fresh: new Set(rows.map((r) => inboxKey(r.message_id))), txid: rows[0]?.txid };
}

/**
 * The handler timeout of a whole transaction with ONE timer, not one per handler call: each call sets
 * its own deadline; the timer, when it fires early (a later call's deadline), re-arms for the rest.
 * Between calls (the router's own statements) it never fires a timeout.
 */
class HandlerClock {
  private timer: NodeJS.Timeout | undefined;
  private deadline = 0;
  private current: { id: string; reject(error: Error): void } | undefined;

  constructor(private readonly ms: number | undefined) {}

  async time<T>(work: Promise<T>, id: string): Promise<T> {
    if (!this.ms) return work;
    this.deadline = Date.now() + this.ms;
    if (!this.timer) this.arm(this.ms);
    const expired = new Promise<never>((_, reject) => (this.current = { id, reject }));
    try {
      return await Promise.race([work, expired]);
    } finally {
      this.current = undefined;
    }
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(delay: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (!this.current) return;
      const left = this.deadline - Date.now();
      if (left > 0) return this.arm(left);
      this.current.reject(
        new OutboxError('HANDLER_TIMEOUT', `The handler of event ${this.current.id} did not finish within ${this.ms} ms (handlerTimeoutMs); its transaction was rolled back and will be retried.`, { retriable: true }),
      );
    }, delay);
  }
}
