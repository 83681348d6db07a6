/**
 * What a stopped connector's slot would still send: the outbox inserts of transactions it has not
 * published, decided per transaction. Shared by `connector:delete --drop-slot` (drop-guard.ts) and
 * `outbox:switch-to-relay` (switch-to-relay.ts).
 *
 * Why per transaction. pgoutput sends whole transactions in commit order; in
 * pg_logical_slot_peek_binary_changes a change row's `lsn` is where the change was written, not where
 * its transaction committed. A transaction that inserted before the connector's position and committed
 * after it was not published although each of its changes lies "before" the position. So a transaction
 * is published when its commit ends at or before the connector's commit position:
 * - the slot's confirmed_flush_lsn (Debezium confirms the `lsn_commit` of an offset Connect stored; the
 *   peek starts there, so such transactions are not even listed), or
 * - the stored offset's `lsn_commit`: the end of the last COMMIT Debezium processed before the offset's
 *   record. The offset's `lsn` and `lsn_proc` are change positions, not commit positions: they say
 *   nothing about other transactions.
 * One transaction may be published in part: the one the stored offset's last event belongs to (its
 * `txId`; Connect stores the offset of the last record acknowledged when the task stops, which may be in
 * the middle of a large transaction). Debezium resumes after that event (its WalPositionLocator), so
 * that transaction's changes up to the offset's `lsn` were published and the rest were not; when its
 * last insert is at or before `lsn`, all of it was.
 *
 * pgoutput protocol 1 messages start with a type byte: 'B' (66) BEGIN, 'C' (67) COMMIT (then int8 flags,
 * int64 commit_lsn, int64 end_lsn, int64 timestamp), 'I' (73) INSERT (then int32 relation OID),
 * 'M' (77) a logical decoding message (with the `messages` option, PostgreSQL 14+). A COMMIT's end_lsn is
 * the position Debezium stores as `lsn_commit` and confirms to the slot.
 *
 * The peek decodes the whole backlog from restart_lsn, which on the large backlogs that prompt a
 * switch takes longer than the connection's statement timeout (database.statementTimeoutMs, 30 s by
 * default): it runs in its own transaction with `peekTimeoutMs` instead (0: no limit), and logs its
 * progress while it runs.
 */
import type { Client } from 'pg';
import { qualified } from '../db';
import type { Logger } from '../log';
import { outboxCleanupTables } from '../provision/sql-files';
import { formatLsn } from './slot-guard';

/** The default of --peek-timeout-ms: one hour; 0 = no limit. */
export const DEFAULT_PEEK_TIMEOUT_MS = 60 * 60 * 1000;
/** How often a running peek logs that it still runs. */
const PROGRESS_EVERY_MS = 15_000;

/** The prefix of the logical decoding message outbox:switch-to-relay writes when it hands the outbox to the relay. */
export const SWITCH_MESSAGE_PREFIX = 'outbox-router.switch-to-relay';

/** The connector's position as the per-transaction rule needs it. */
export interface StreamPosition {
  /** Transactions whose commit ends at or before this were published: the later of confirmed_flush_lsn and the offset's lsn_commit. */
  commitLsn: bigint;
  /** The stored offset's last event, when it has one: its transaction (32-bit xid) was published up to `lsn`. */
  event?: { xid: bigint; lsn: bigint };
}

export interface PendingTransaction {
  /** The transaction's id widened to the xid8 the outbox's tx_id column holds. */
  txId: bigint;
  /** Its outbox inserts the slot would still send. */
  unpublishedInserts: number;
  /** All its outbox inserts (more than unpublishedInserts only for the transaction of the offset's last event). */
  inserts: number;
  /** Where its commit record ends. */
  commitEndLsn: string;
}

export interface PeekResult {
  transactions: PendingTransaction[];
  /** A switch-to-relay message lies past the position: the relay owns the outbox since then. */
  handedToRelay: boolean;
  peekMs: number;
}

/** Optional numeric offset keys as bigints (Debezium stores longs; Connect's REST API returns numbers). */
function offsetNumber(offset: Readonly<Record<string, unknown>> | undefined, key: string): bigint | undefined {
  const v = offset?.[key];
  return (typeof v === 'number' && Number.isInteger(v) && v >= 0) || (typeof v === 'string' && /^\d+$/.test(v)) ? BigInt(v) : undefined;
}

/** The per-transaction position of a stopped connector from its slot's confirmed_flush_lsn and its stored offset. Pure. */
export function streamPosition(confirmedFlushLsn: bigint | undefined, offset: Readonly<Record<string, unknown>> | undefined): StreamPosition {
  const commit = offsetNumber(offset, 'lsn_commit');
  const commitLsn = [confirmedFlushLsn ?? 0n, commit ?? 0n].reduce((a, b) => (a > b ? a : b));
  const xid = offsetNumber(offset, 'txId');
  const lsn = offsetNumber(offset, 'lsn');
  return xid !== undefined && lsn !== undefined ? { commitLsn, event: { xid, lsn } } : { commitLsn };
}

const XID_MOD = 2n ** 32n;

/** A 32-bit xid widened to its xid8, given an xid8 at or after it (less than 2^31 transactions apart). */
export function widenXid(xid: bigint, current: bigint): bigint {
  const epoch = current / XID_MOD;
  const low = current % XID_MOD;
  return (xid <= low ? epoch : epoch - 1n) * XID_MOD + xid;
}

/**
 * One row per transaction with an outbox insert whose commit ends past $4 (the commit position): its
 * xid, its inserts, those past the offset's last event ($6, for the transaction $5 only) and its commit
 * end. Plus one row (xid NULL) counting switch-to-relay messages past the position: written past it,
 * so committed past it too (a message written before the position in a transaction that commits after
 * it is not counted: the safe side, gone rows then count as unpublished).
 */
function peekSql(messages: boolean): string {
  return `
WITH m AS (
  SELECT xid, lsn, get_byte(data, 0) AS kind,
         CASE get_byte(data, 0)
           WHEN 67 THEN ('x' || encode(substring(data FROM 11 FOR 8), 'hex'))::bit(64)::bigint
           WHEN 73 THEN ('x' || lpad(encode(substring(data FROM 2 FOR 4), 'hex'), 16, '0'))::bit(64)::bigint
         END AS n,
         get_byte(data, 0) = 77 AND position(convert_to($7::text, 'UTF8') IN data) > 0 AS switched
    FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2${messages ? ", 'messages', 'true'" : ''})
), t AS (
  SELECT xid,
         count(*) FILTER (WHERE kind = 73) AS inserts,
         count(*) FILTER (WHERE kind = 73 AND NOT coalesce(xid::text::bigint = $5::bigint AND pg_wal_lsn_diff(lsn, '0/0') <= $6::numeric, false)) AS unpublished,
         max(n) FILTER (WHERE kind = 67) AS commit_end
    FROM m
   WHERE kind = 67 OR (kind = 73 AND n = $3::bigint)
   GROUP BY xid
)
SELECT xid::text AS xid, inserts::text, unpublished::text, commit_end::text FROM t WHERE inserts > 0 AND commit_end > $4::bigint
UNION ALL
SELECT NULL, count(*)::text, NULL, NULL FROM m WHERE switched AND pg_wal_lsn_diff(lsn, '0/0') > $4::numeric`;
}

/** Runs `body` in a transaction whose statements may take `timeoutMs` (0: no limit) instead of the connection's statement timeout. */
export async function withStatementTimeout<T>(db: Client, timeoutMs: number, body: () => Promise<T>): Promise<T> {
  await db.query('BEGIN');
  try {
    await db.query("SELECT set_config('statement_timeout', $1, true)", [String(timeoutMs)]);
    const result = await body();
    await db.query('COMMIT');
    return result;
  } catch (error) {
    await db.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

/**
 * Peeks `slotName` (consuming nothing) for the outbox transactions past `position`. Call it inside
 * withStatementTimeout. The slot must not be active. Undefined when the outbox table does not exist.
 */
export async function peekPending(
  db: Client,
  outbox: { schema: string; table: string; publication: string },
  slotName: string,
  position: StreamPosition,
  log?: Logger,
): Promise<PeekResult | undefined> {
  const oid = (await db.query<{ oid: string | null }>('SELECT to_regclass($1)::oid::bigint::text AS oid', [qualified(outbox.schema, outbox.table)])).rows[0]?.oid;
  if (!oid) return undefined;
  const server = (await db.query<{ v: string; xmax: string }>("SELECT current_setting('server_version_num') AS v, pg_snapshot_xmax(pg_current_snapshot())::text AS xmax")).rows[0]!;
  const started = Date.now();
  const progress = setInterval(() => {
    log?.info({ step: 'peek', slotName, elapsedMs: Date.now() - started }, `still peeking slot ${slotName} (decoding its backlog from restart_lsn; ${Math.round((Date.now() - started) / 1000)} s so far)`);
  }, PROGRESS_EVERY_MS);
  progress.unref();
  try {
    const params = [slotName, outbox.publication, oid, position.commitLsn.toString(), position.event?.xid.toString() ?? null, position.event?.lsn.toString() ?? null, SWITCH_MESSAGE_PREFIX];
    const { rows } = await db.query<{ xid: string | null; inserts: string; unpublished: string | null; commit_end: string | null }>(peekSql(Number(server.v) >= 140000), params);
    const xmax = BigInt(server.xmax);
    const transactions = rows
      .filter((r) => r.xid !== null && Number(r.unpublished) > 0)
      .map((r) => ({ txId: widenXid(BigInt(r.xid!), xmax), inserts: Number(r.inserts), unpublishedInserts: Number(r.unpublished), commitEndLsn: formatLsn(BigInt(r.commit_end!)) }));
    const handedToRelay = Number(rows.find((r) => r.xid === null)?.inserts ?? 0) > 0;
    await voidCleanupMarks(db, outbox, slotName);
    const peekMs = Date.now() - started;
    if (peekMs >= PROGRESS_EVERY_MS) log?.info({ step: 'peek', slotName, peekMs, transactions: transactions.length }, `peeked slot ${slotName} in ${Math.round(peekMs / 1000)} s`);
    return { transactions, handedToRelay, peekMs };
  } finally {
    clearInterval(progress);
  }
}

/**
 * A peek decodes the slot's backlog and so raises its statistics (pg_stat_replication_slots.total_txns)
 * as streaming does, without confirming anything. The CDC cleanup (migration 012) lets a mark free rows
 * only once the slot has decoded since the mark was taken, its guard against a re-created slot that
 * does not stream: so the marks taken before this peek are void. Deleted in the peek's transaction; the
 * cleanup's next run takes a new mark.
 */
async function voidCleanupMarks(db: Client, outbox: { schema: string; table: string }, slotName: string): Promise<void> {
  const { marks } = outboxCleanupTables(outbox);
  const { rows } = await db.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [marks]);
  if (rows[0]?.t) await db.query(`DELETE FROM ${marks} WHERE slot_name = $1`, [slotName]);
}

/**
 * The xid8 of the transaction that applied migration 011, which added the outbox's tx_id column: rows
 * written before it have tx_id NULL. Undefined when 011 is not applied (there is no tx_id column).
 */
export async function migrationTxId(db: Client, outbox: { schema: string; migrationsTable: string }): Promise<bigint | undefined> {
  const { rows } = await db.query<{ xmin: string; xmax: string }>(
    `SELECT xmin::text AS xmin, pg_snapshot_xmax(pg_current_snapshot())::text AS xmax FROM ${qualified(outbox.schema, outbox.migrationsTable)} WHERE id = 11`,
  );
  return rows[0] ? widenXid(BigInt(rows[0].xmin), BigInt(rows[0].xmax)) : undefined;
}
