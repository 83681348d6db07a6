/**
 * Switching a pipeline from CDC to the polling relay without publishing the CDC era again. Under CDC
 * every row keeps published_at NULL, so a relay started on that outbox would publish all of them a
 * second time. This stops the connector and marks published exactly the rows it had published; the
 * rest stay for the relay.
 *
 * Which rows were published: the connector is STOPPED (Debezium confirms to the slot, and Connect
 * stores the offset, of everything it published before it stops). Its position is the later of the
 * slot's confirmed_flush_lsn and the stored offset (drop-guard.ts explains why). Peeking the slot (which
 * consumes nothing) lists the outbox inserts past that position with their transaction ids: those
 * transactions were not published. Every other transaction that had ended was. So:
 *   1. x = the xmin of a snapshot: transactions below it have ended;
 *   2. wait until the WAL is flushed past the insert position taken after it (an asynchronous commit's
 *      record may not be flushed yet, and a peek reads flushed WAL only);
 *   3. peek the unpublished inserts' transaction ids;
 *   4. mark published the rows with tx_id < x whose transaction is not among them.
 * Rows of transactions at or after x (running during the switch; the connector is stopped, so none of
 * them was published) stay for the relay. Rows written before migration 011 (tx_id NULL) are marked
 * only when no unpublished transaction is older than the one that applied that migration.
 */
import type { Client } from 'pg';
import type { OutboxConfig } from '../config';
import { pgCode, qualified } from '../db';
import { OutboxError } from '../errors';
import type { Logger } from '../log';
import { sleep } from '../retry';
import { createConnectClient, type ConnectClient } from './connect-client';
import { readSlot, withAdmin } from './database';
import { outboxInsertsBehindSql } from './drop-guard';
import { formatLsn, offsetForServer, offsetLsn, parseLsn } from './slot-guard';
import { waitForState } from './wait';

export interface SwitchToRelayOptions {
  client?: ConnectClient;
  log?: Logger;
  /** Count only; change nothing (the connector must already be stopped: a running one holds the slot). */
  dryRun?: boolean;
  /** Rows per UPDATE statement. */
  batchSize?: number;
  timeoutMs?: number;
}

export interface SwitchToRelayReport {
  connector: string;
  /** Whether this run stopped the connector (it stays STOPPED). */
  stopped: boolean;
  slotName: string;
  /** The connector's position: the later of confirmed_flush_lsn and its stored offset. */
  position: string;
  /** Transactions with outbox inserts past the position (their rows stay for the relay). */
  unpublishedTransactions: number;
  /** Rows marked published: the connector had published them. */
  markedPublished: number;
  /** Rows left with published_at NULL: the relay publishes them. */
  leftForRelay: number;
  dryRun: boolean;
}

const XID_MOD = 2n ** 32n;

/** A 32-bit xid widened to its xid8, given a current xid8 at or after it (less than 2^31 transactions apart). */
export function widenXid(xid: bigint, current: bigint): bigint {
  const epoch = current / XID_MOD;
  const low = current % XID_MOD;
  return (xid <= low ? epoch : epoch - 1n) * XID_MOD + xid;
}

export async function switchToRelay(config: OutboxConfig, options: SwitchToRelayOptions = {}): Promise<SwitchToRelayReport> {
  const client = options.client ?? createConnectClient(config.connect);
  const name = config.connector.name;
  const timeoutMs = options.timeoutMs ?? config.connector.deployTimeoutMs;
  const stored = await client.getConfig(name);
  const slotName = stored?.['slot.name'] ?? config.connector.slotName;
  let stopped = false;
  let offset: Record<string, unknown> | undefined;
  if (stored) {
    const state = (await client.status(name))?.connector.state;
    if (state !== 'STOPPED') {
      if (options.dryRun) throw refused(`connector ${name} is ${state}: a dry run changes nothing, so it does not stop the connector, and a running connector holds the slot. Run without --dry-run, or stop it first.`);
      await client.stop(name);
      await waitForState(client, name, 'STOPPED', timeoutMs);
      stopped = true;
      options.log?.info({ step: 'switch' }, `stopped connector ${name}`);
    }
    offset = offsetForServer(await client.offsets(name), stored['topic.prefix'] ?? config.connector.topicPrefix);
  }
  const report = await withAdmin(config, (db) => markPublished(db, config, slotName, offset, { ...options, timeoutMs }));
  return { connector: name, stopped, ...report };
}

async function markPublished(db: Client, config: OutboxConfig, slotName: string, storedOffset: Record<string, unknown> | undefined, options: SwitchToRelayOptions & { timeoutMs: number }) {
  const { schema, table, publication, migrationsTable } = config.outbox;
  const outbox = qualified(schema, table);
  const deadline = Date.now() + options.timeoutMs;
  let slot = await readSlot(db, slotName);
  while (slot?.active && Date.now() < deadline) {
    await sleep(250);
    slot = await readSlot(db, slotName);
  }
  if (!slot) throw refused(`there is no replication slot ${slotName} in ${config.database.database}, so which rows the connector published cannot be known. Start the relay as it is: it publishes every row again, and the consumers' inbox drops the duplicates.`);
  if (slot.active) throw refused(`the slot ${slotName} is still in use by pid ${slot.activePid}: stop whatever streams it.`);
  if (slot.plugin !== 'pgoutput') throw refused(`the slot ${slotName} uses the ${slot.plugin} plugin; only pgoutput slots (plugin.name=pgoutput) can be read.`);
  if (slot.walStatus === 'lost' || slot.confirmedFlushLsn === null) throw refused(`the slot ${slotName} is lost: the WAL it had not read is gone, so its unpublished transactions cannot be listed. Start the relay as it is: it publishes every row still in the outbox, and the consumers' inbox drops the ones CDC had published.`);
  const confirmed = parseLsn(slot.confirmedFlushLsn);
  const stored = offsetLsn(storedOffset);
  const position = stored !== undefined && stored > confirmed ? stored : confirmed;

  try {
    const x = (await db.query<{ x: string }>('SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS x')).rows[0]!.x;
    const insertLsn = (await db.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn')).rows[0]!.lsn;
    while (!(await db.query<{ ok: boolean }>('SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn AS ok', [insertLsn])).rows[0]!.ok) {
      if (Date.now() > deadline) throw refused(`the WAL was not flushed past ${insertLsn} in time; run it again.`);
      await sleep(10);
    }
    const oid = (await db.query<{ oid: string | null }>('SELECT to_regclass($1)::oid::bigint::text AS oid', [outbox])).rows[0]?.oid;
    const pending = oid ? (await db.query<{ xid: string }>(outboxInsertsBehindSql('DISTINCT xid::text AS xid'), [slotName, publication, oid, position.toString()])).rows : [];
    const current = BigInt((await db.query<{ c: string }>('SELECT pg_current_xact_id()::text AS c')).rows[0]!.c);
    const unpublished = pending.map((r) => widenXid(BigInt(r.xid), current));
    // Rows from before migration 011 have no tx_id: published if no unpublished transaction is older than
    // the one that applied the migration (the xmin of its row in the migrations table).
    const applied = (await db.query<{ xmin: string }>(`SELECT xmin::text AS xmin FROM ${qualified(schema, migrationsTable)} WHERE id = 11`)).rows[0];
    const migrationXid = applied ? widenXid(BigInt(applied.xmin), current) : current;
    const nullRowsPublished = unpublished.every((u) => u > migrationXid);
    const where = `published_at IS NULL AND (tx_id < $1::bigint${nullRowsPublished ? ' OR tx_id IS NULL' : ''}) AND NOT (coalesce(tx_id, -1) = ANY($2::bigint[]))`;
    const params = [x, unpublished.map(String)];
    let marked = 0;
    if (options.dryRun) {
      marked = Number((await db.query<{ n: string }>(`SELECT count(*)::bigint::text AS n FROM ${outbox} WHERE ${where}`, params)).rows[0]!.n);
    } else {
      const batchSize = options.batchSize ?? 10_000;
      for (;;) {
        const n = (await db.query(`UPDATE ${outbox} SET published_at = now() WHERE id IN (SELECT id FROM ${outbox} WHERE ${where} LIMIT $3)`, [...params, batchSize])).rowCount ?? 0;
        marked += n;
        if (n < batchSize) break;
      }
    }
    const waiting = Number((await db.query<{ n: string }>(`SELECT count(*)::bigint::text AS n FROM ${outbox} WHERE published_at IS NULL`)).rows[0]!.n);
    return { slotName, position: formatLsn(position), unpublishedTransactions: unpublished.length, markedPublished: marked, leftForRelay: options.dryRun ? waiting - marked : waiting, dryRun: !!options.dryRun };
  } catch (error) {
    if (pgCode(error) === '42501') throw refused(`the admin role may not read the slot or update the outbox (${(error as Error).message}): it needs REPLICATION (or superuser) to peek a slot.`, error);
    if (pgCode(error) === '55006') throw refused(`the slot ${slotName} became active while switching: stop whatever streams it and run the command again.`, error);
    throw error;
  }
}

function refused(reason: string, cause?: unknown): OutboxError {
  return new OutboxError('RELAY_SWITCH_REFUSED', `outbox:switch-to-relay marked nothing: ${reason}`, cause === undefined ? {} : { cause });
}
