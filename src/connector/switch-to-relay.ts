/**
 * Switching a pipeline from CDC to the polling relay without publishing the CDC era again. Under CDC
 * every row keeps published_at NULL, so a relay started on that outbox would publish all of them a
 * second time. This stops the connector and marks published exactly the rows it had published; the
 * rest stay for the relay.
 *
 * Which rows were published: the connector is STOPPED (Debezium confirms to the slot, and Connect
 * stores the offset, of everything it published before it stops). Peeking the slot (which consumes
 * nothing) lists the transactions with outbox inserts it has not published, decided per transaction by
 * their commit (slot-peek.ts). Every other transaction that had ended was published. So:
 *   1. x = the xmin of a snapshot: transactions below it have ended;
 *   2. wait until the WAL is flushed past the insert position taken after it (an asynchronous commit's
 *      record may not be flushed yet, and a peek reads flushed WAL only);
 *   3. peek the unpublished transactions' ids (in a transaction of its own, without the connection's
 *      statement timeout: large backlogs take minutes);
 *   4. write a switch-to-relay logical decoding message (the drop guard reads it), then mark published
 *      the rows with tx_id < x whose transaction is not among them.
 * Rows of transactions at or after x (running during the switch; the connector is stopped, so none of
 * them was published) stay for the relay. Rows written before migration 011 (tx_id NULL) are marked
 * only when no unpublished transaction can own one (every one has a row with its tx_id for each insert
 * the slot lists).
 */
import type { Client } from 'pg';
import type { OutboxConfig } from '../config';
import { pgCode, qualified } from '../db';
import { OutboxError } from '../errors';
import type { Logger } from '../log';
import { sleep } from '../retry';
import { createConnectClient, type ConnectClient } from './connect-client';
import { readSlot, withAdmin } from './database';
import { formatLsn, offsetForServer, parseLsn } from './slot-guard';
import { DEFAULT_PEEK_TIMEOUT_MS, SWITCH_MESSAGE_PREFIX, migrationTxId, peekPending, streamPosition, withStatementTimeout } from './slot-peek';
import { waitForState } from './wait';

export interface SwitchToRelayOptions {
  client?: ConnectClient;
  log?: Logger;
  /** Count only; change nothing (the connector must already be stopped: a running one holds the slot). */
  dryRun?: boolean;
  /** Rows per UPDATE statement. */
  batchSize?: number;
  timeoutMs?: number;
  /** The slot peek's statement timeout in ms (0: none); database.statementTimeoutMs does not apply to it (slot-peek.ts). */
  peekTimeoutMs?: number;
}

export interface SwitchToRelayReport {
  connector: string;
  /** Whether this run stopped the connector (it stays STOPPED). */
  stopped: boolean;
  slotName: string;
  /** The connector's commit position: the later of confirmed_flush_lsn and its stored offset's lsn_commit. */
  position: string;
  /** Transactions with outbox inserts past the position (their rows stay for the relay). */
  unpublishedTransactions: number;
  /** Rows marked published: the connector had published them. */
  markedPublished: number;
  /** Rows left with published_at NULL: the relay publishes them. */
  leftForRelay: number;
  dryRun: boolean;
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
  const { schema, table } = config.outbox;
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
  const position = streamPosition(parseLsn(slot.confirmedFlushLsn), storedOffset);

  try {
    const x = (await db.query<{ x: string }>('SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS x')).rows[0]!.x;
    const insertLsn = (await db.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn')).rows[0]!.lsn;
    while (!(await db.query<{ ok: boolean }>('SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn AS ok', [insertLsn])).rows[0]!.ok) {
      if (Date.now() > deadline) throw refused(`the WAL was not flushed past ${insertLsn} in time; run it again.`);
      await sleep(10);
    }
    const peek = await withStatementTimeout(db, options.peekTimeoutMs ?? DEFAULT_PEEK_TIMEOUT_MS, () => peekPending(db, config.outbox, slotName, position, options.log));
    // A transaction the connector published only in part (the stored offset ends inside it) is left to
    // the relay whole: its published part goes out again, and the consumers' inbox drops it.
    const pending = peek?.transactions ?? [];
    const unpublished = pending.map((t) => t.txId);
    const legacy = await migrationTxId(db, config.outbox);
    if (legacy === undefined) throw refused(`the outbox has no tx_id column yet (migration 011 is not applied): run \`outbox db:provision\` first.`);
    // Rows from before migration 011 have no tx_id. An xid says nothing about them: every pending
    // migration runs in one transaction, whose xid an earlier migration may have taken before a writer
    // with a later xid inserted a row without the column. So they are published only if no unpublished
    // transaction can own one: each has as many rows with its tx_id as the slot lists inserts. A
    // transaction with rows gone (insert-then-delete) leaves the doubt, and them, to the relay: at worst
    // duplicates, which the consumers' inbox drops.
    const nullRowsPublished = pending.length === 0 || (await everyInsertHasTxId(db, outbox, pending));
    const where = `published_at IS NULL AND (tx_id < $1::bigint${nullRowsPublished ? ' OR tx_id IS NULL' : ''}) AND NOT (coalesce(tx_id, -1) = ANY($2::bigint[]))`;
    const params = [x, unpublished.map(String)];
    let marked = 0;
    if (options.dryRun) {
      marked = Number((await db.query<{ n: string }>(`SELECT count(*)::bigint::text AS n FROM ${outbox} WHERE ${where}`, params)).rows[0]!.n);
    } else {
      // Written first, so a role that may not write it marks nothing: the drop guard reads it as "the relay
      // owns this outbox since here" (drop-guard.ts). Transactional: it exists only if this run got this far.
      await db.query('SELECT pg_logical_emit_message(true, $1, $2)', [SWITCH_MESSAGE_PREFIX, JSON.stringify({ slotName, position: formatLsn(position.commitLsn), unpublishedTransactions: unpublished.length })]);
      const batchSize = options.batchSize ?? 10_000;
      for (;;) {
        const n = (await db.query(`UPDATE ${outbox} SET published_at = now() WHERE id IN (SELECT id FROM ${outbox} WHERE ${where} LIMIT $3)`, [...params, batchSize])).rowCount ?? 0;
        marked += n;
        if (n < batchSize) break;
      }
    }
    const waiting = Number((await db.query<{ n: string }>(`SELECT count(*)::bigint::text AS n FROM ${outbox} WHERE published_at IS NULL`)).rows[0]!.n);
    return { slotName, position: formatLsn(position.commitLsn), unpublishedTransactions: unpublished.length, markedPublished: marked, leftForRelay: options.dryRun ? waiting - marked : waiting, dryRun: !!options.dryRun };
  } catch (error) {
    if (pgCode(error) === '42501') throw refused(`the admin role may not read the slot or update the outbox (${(error as Error).message}): it needs REPLICATION (or superuser) to peek a slot.`, error);
    if (pgCode(error) === '55006') throw refused(`the slot ${slotName} became active while switching: stop whatever streams it and run the command again.`, error);
    throw error;
  }
}

/** Whether every pending transaction's outbox inserts are all rows carrying its tx_id. */
async function everyInsertHasTxId(db: Client, outbox: string, pending: ReadonlyArray<{ txId: bigint; inserts: number }>): Promise<boolean> {
  const { rows } = await db.query<{ short: string }>(
    `WITH p AS (SELECT * FROM unnest($1::bigint[], $2::int[]) AS p(tx, inserts)),
          o AS (SELECT o.tx_id, count(*) AS present FROM ${outbox} o JOIN p ON o.tx_id = p.tx GROUP BY o.tx_id)
     SELECT count(*)::text AS short FROM p LEFT JOIN o ON o.tx_id = p.tx WHERE coalesce(o.present, 0) < p.inserts`,
    [pending.map((t) => t.txId.toString()), pending.map((t) => t.inserts)],
  );
  return rows[0]?.short === '0';
}

function refused(reason: string, cause?: unknown): OutboxError {
  return new OutboxError('RELAY_SWITCH_REFUSED', `outbox:switch-to-relay marked nothing: ${reason}`, cause === undefined ? {} : { cause });
}
