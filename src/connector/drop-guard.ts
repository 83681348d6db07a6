/**
 * Guard rail of `connector:delete --drop-slot`: dropping the slot discards every change the connector
 * has not confirmed, so outbox rows committed after its position are never published. Before the
 * drop (with the connector already STOPPED, so no walsender holds the slot) this measures:
 * - the unconfirmed WAL: pg_current_wal_lsn() − confirmed_flush_lsn. WAL is cluster-wide, so on a
 *   busy cluster this is rarely 0 even when no outbox row is behind: shown, not judged on its own;
 * - the outbox rows behind: peeking the slot (consuming nothing) lists the outbox inserts of the
 *   transactions the connector has not published, decided per transaction (slot-peek.ts: its commit
 *   past the later of confirmed_flush_lsn and the stored offset's lsn_commit); of those, the rows that
 *   nothing else has published since are counted.
 * "Published since": after `outbox:switch-to-relay` the polling relay publishes those rows and sets
 * their published_at, so a row with published_at set is not lost with the slot (CDC never sets it).
 * A row that no longer exists is not proof of publishing. The paths that delete outbox rows:
 * - the relay's cleanup (src/relay/sql.ts) deletes only rows it published (published_at set);
 * - the cleanup under CDC (migration 011) deletes only rows of transactions the slot has confirmed,
 *   which the peek never lists;
 * - insert-then-delete writers (deleteAfterInsert, src/producer/writer.ts) delete their own row in the
 *   inserting transaction, unpublished: the event exists only in the WAL, and dropping the slot loses it.
 * So a missing row counts as unpublished, unless a switch-to-relay message lies past the position: the
 * outbox was handed to the relay (which cannot run with insert-then-delete writers), and its cleanup
 * deletes the rows it published. Rows from before migration 011 (tx_id NULL) cannot be looked up: the
 * slot's count stands for them.
 * A count > 0 refuses. When the count cannot be made (no REPLICATION right, publication gone, the
 * peek timeout, the slot still held), unconfirmed WAL above a tolerance refuses instead: the sound side
 * when nothing better is known.
 */
import type { Client } from 'pg';
import type { OutboxConfig } from '../config';
import { qualified } from '../db';
import { OutboxError } from '../errors';
import type { Logger } from '../log';
import { sleep } from '../retry';
import { readSlot } from './database';
import { formatLsn, parseLsn } from './slot-guard';
import { DEFAULT_PEEK_TIMEOUT_MS, migrationTxId, peekPending, streamPosition, withStatementTimeout, type PendingTransaction } from './slot-peek';

/** Unconfirmed WAL tolerated when outbox rows cannot be counted: a heartbeat interval's worth on an idle cluster. */
export const DROP_TOLERANCE_BYTES = 1024 * 1024;

export interface Unconfirmed {
  slotName: string;
  /** pg_current_wal_lsn() − confirmed_flush_lsn. */
  unconfirmedBytes: number | null;
  confirmedFlushLsn: string | null;
  /** The connector's commit position: the later of confirmed_flush_lsn and its stored offset's lsn_commit. */
  position: string | null;
  /** Outbox rows of transactions committed past `position` that nothing has published; null when they could not be counted (see countError). */
  outboxRows: number | null;
  /** Transactions with outbox inserts the slot has not sent. */
  unpublishedTransactions?: number;
  /** A switch to the relay lies past the position: missing rows are the relay's. */
  handedToRelay?: boolean;
  countError?: string;
}

export interface ReadUnconfirmedOptions {
  /** The peek's statement timeout in ms (0: none); the connection's statementTimeoutMs does not apply to it. */
  peekTimeoutMs?: number;
  log?: Logger;
}

/**
 * Of `pending`, the rows nothing has published: still in the outbox with published_at NULL, or gone
 * (unless `handedToRelay`), at most each transaction's unpublished inserts. Transactions at or before
 * `legacyTxId` (the one that applied migration 011) may have rows with tx_id NULL: the slot's count
 * stands for them.
 */
async function countStillUnpublished(db: Client, config: OutboxConfig, pending: PendingTransaction[], handedToRelay: boolean, legacyTxId: bigint | undefined): Promise<number> {
  if (pending.length === 0) return 0;
  const slotCount = pending.reduce((n, t) => n + t.unpublishedInserts, 0);
  if (legacyTxId === undefined) return slotCount; // no tx_id column: nothing to look up
  const outbox = qualified(config.outbox.schema, config.outbox.table);
  const { rows } = await db.query<{ n: string }>(
    `WITH p AS (SELECT * FROM unnest($1::bigint[], $2::int[], $3::int[]) AS p(tx, unpublished, inserts)),
          o AS (SELECT o.tx_id, count(*) FILTER (WHERE o.published_at IS NULL) AS waiting, count(*) AS present
                  FROM ${outbox} o JOIN p ON o.tx_id = p.tx GROUP BY o.tx_id)
     SELECT coalesce(sum(CASE WHEN p.tx <= $4::bigint THEN p.unpublished
                              ELSE least(p.unpublished, coalesce(o.waiting, 0) + CASE WHEN $5::boolean THEN 0 ELSE greatest(p.inserts - coalesce(o.present, 0), 0) END)
                         END), 0)::bigint::text AS n
       FROM p LEFT JOIN o ON o.tx_id = p.tx`,
    [pending.map((t) => t.txId.toString()), pending.map((t) => t.unpublishedInserts), pending.map((t) => t.inserts), legacyTxId.toString(), handedToRelay],
  );
  return Number(rows[0]?.n ?? slotCount);
}

/**
 * Reads what dropping `slotName` would discard; undefined when the slot does not exist. Waits up to
 * `timeoutMs` for a walsender to let go of the slot (Connect stops tasks asynchronously).
 */
export async function readUnconfirmed(
  db: Client,
  config: OutboxConfig,
  slotName: string,
  storedOffset: Readonly<Record<string, unknown>> | undefined,
  timeoutMs: number,
  options: ReadUnconfirmedOptions = {},
): Promise<Unconfirmed | undefined> {
  const deadline = Date.now() + timeoutMs;
  let slot = await readSlot(db, slotName);
  while (slot?.active && Date.now() < deadline) {
    await sleep(250);
    slot = await readSlot(db, slotName);
  }
  if (!slot) return undefined;
  const position = streamPosition(slot.confirmedFlushLsn === null ? undefined : parseLsn(slot.confirmedFlushLsn), storedOffset);
  const result: Unconfirmed = {
    slotName,
    unconfirmedBytes: slot.confirmedLagBytes,
    confirmedFlushLsn: slot.confirmedFlushLsn,
    position: position.commitLsn === 0n ? null : formatLsn(position.commitLsn),
    outboxRows: null,
  };
  if (slot.active) return { ...result, countError: `the slot is still in use by pid ${slot.activePid}` };
  try {
    return await withStatementTimeout(db, options.peekTimeoutMs ?? DEFAULT_PEEK_TIMEOUT_MS, async () => {
      const peek = await peekPending(db, config.outbox, slotName, position, options.log);
      if (!peek) return { ...result, outboxRows: 0 };
      const legacy = await migrationTxId(db, config.outbox);
      const outboxRows = await countStillUnpublished(db, config, peek.transactions, peek.handedToRelay, legacy);
      return { ...result, outboxRows, unpublishedTransactions: peek.transactions.length, handedToRelay: peek.handedToRelay };
    });
  } catch (error) {
    return { ...result, countError: (error as Error).message };
  }
}

/** The refusal for what readUnconfirmed found, or undefined when dropping loses nothing. Pure. */
export function dropRefusal(connector: string, work: Unconfirmed | undefined): OutboxError | undefined {
  if (!work) return undefined;
  const bytes = work.unconfirmedBytes ?? 0;
  const rows = work.outboxRows;
  if (rows === 0 || (rows === null && bytes <= DROP_TOLERANCE_BYTES)) return undefined;
  const what =
    rows === null
      ? `${bytes} bytes of WAL are unconfirmed by slot "${work.slotName}" (confirmed_flush_lsn ${work.confirmedFlushLsn}), more than the ${DROP_TOLERANCE_BYTES}-byte tolerance, ` +
        `and the outbox rows among them could not be counted (${work.countError})`
      : `${rows} committed outbox row(s) lie past the connector's position ${work.position}: not published yet; ` +
        `slot "${work.slotName}" has ${bytes} bytes of WAL unconfirmed (confirmed_flush_lsn ${work.confirmedFlushLsn})`;
  return new OutboxError(
    'CONNECTOR_DELETE_UNSAFE',
    `Refusing to drop the slot of connector ${connector}: ${what}. Dropping the slot discards them: they would never be published. ` +
      'Resume the connector (outbox connector:resume) and let it catch up until connector:status shows the slot confirmed, then delete again; ' +
      'or run connector:delete --drop-slot --force to discard them knowingly. Nothing was deleted (a connector that was stopped for this check is back in its previous state).',
    { details: { ...work } },
  );
}
