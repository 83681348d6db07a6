/**
 * Guard rail of `connector:delete --drop-slot`: dropping the slot discards every change the connector
 * has not confirmed, so outbox rows committed after its position are never published. Before the
 * drop (with the connector already STOPPED, so no walsender holds the slot) this measures:
 * - the unconfirmed WAL: pg_current_wal_lsn() − confirmed_flush_lsn. WAL is cluster-wide, so on a
 *   busy cluster this is rarely 0 even when no outbox row is behind: shown, not judged on its own;
 * - the outbox rows behind: peeking the slot (pg_logical_slot_peek_binary_changes, which consumes
 *   nothing) decodes exactly what the slot would still send through the publication; the inserts into
 *   the outbox table past the connector's position are counted. That position is the later of
 *   confirmed_flush_lsn and the stored Connect offset: Debezium confirms to the slot only after
 *   Connect stored the offset (on the connector's stop, for everything it had published), so events
 *   between the two were published. Compared per change, not per commit: the stored offset of a
 *   published transaction's last event is before that transaction's commit record.
 * A count > 0 refuses. When the count cannot be made (no REPLICATION right, publication gone, the
 * statement timeout on a huge backlog, the slot still held), unconfirmed WAL above a tolerance refuses
 * instead: the sound side when nothing better is known.
 */
import type { Client } from 'pg';
import type { OutboxConfig } from '../config';
import { OutboxError } from '../errors';
import { sleep } from '../retry';
import { readSlot } from './database';
import { quoteIdent } from './escape';
import { formatLsn, offsetLsn, parseLsn } from './slot-guard';

/** Unconfirmed WAL tolerated when outbox rows cannot be counted: a heartbeat interval's worth on an idle cluster. */
export const DROP_TOLERANCE_BYTES = 1024 * 1024;

export interface Unconfirmed {
  slotName: string;
  /** pg_current_wal_lsn() − confirmed_flush_lsn. */
  unconfirmedBytes: number | null;
  confirmedFlushLsn: string | null;
  /** The connector's position: the later of confirmed_flush_lsn and its stored offset. */
  position: string | null;
  /** Outbox inserts past `position` (committed, not published); null when they could not be counted (see countError). */
  outboxRows: number | null;
  countError?: string;
}

/**
 * pgoutput (protocol 1) messages start with their type byte; an insert ('I' = 73) continues with the
 * relation's OID (int32). `select` is the select list (count, or the transaction ids). A change row's `lsn` is the position Debezium stores as the event's `lsn`
 * (both are the walsender's write position for that change), so the comparison is like for like.
 */
export function outboxInsertsBehindSql(select: string): string {
  return `
SELECT ${select}
  FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)
 WHERE get_byte(data, 0) = 73
   AND ('x' || lpad(encode(substring(data FROM 2 FOR 4), 'hex'), 16, '0'))::bit(64)::bigint = $3::bigint
   AND pg_wal_lsn_diff(lsn, '0/0') > $4::numeric`;
}
const BEHIND_SQL = outboxInsertsBehindSql('count(*)::bigint::text AS n');

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
): Promise<Unconfirmed | undefined> {
  const deadline = Date.now() + timeoutMs;
  let slot = await readSlot(db, slotName);
  while (slot?.active && Date.now() < deadline) {
    await sleep(250);
    slot = await readSlot(db, slotName);
  }
  if (!slot) return undefined;
  const confirmed = slot.confirmedFlushLsn === null ? undefined : parseLsn(slot.confirmedFlushLsn);
  const stored = offsetLsn(storedOffset);
  const position = confirmed === undefined ? stored : stored === undefined || confirmed > stored ? confirmed : stored;
  const result: Unconfirmed = {
    slotName,
    unconfirmedBytes: slot.confirmedLagBytes,
    confirmedFlushLsn: slot.confirmedFlushLsn,
    position: position === undefined ? null : formatLsn(position),
    outboxRows: null,
  };
  if (slot.active) return { ...result, countError: `the slot is still in use by pid ${slot.activePid}` };
  const { schema, table, publication } = config.outbox;
  try {
    const oid = await db.query<{ oid: string | null }>('SELECT to_regclass($1)::oid::bigint::text AS oid', [`${quoteIdent(schema)}.${quoteIdent(table)}`]);
    const tableOid = oid.rows[0]?.oid;
    if (!tableOid) return { ...result, outboxRows: 0 };
    const { rows } = await db.query<{ n: string }>(BEHIND_SQL, [slotName, publication, tableOid, (position ?? 0n).toString()]);
    return { ...result, outboxRows: Number(rows[0]?.n ?? 0) };
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
