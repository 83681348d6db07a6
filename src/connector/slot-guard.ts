/**
 * Deploy guard rails on the replication slot versus the connector's stored offset. Pure: the caller
 * reads pg_replication_slots and `GET /connectors/{name}/offsets`.
 *
 * How the two relate (Debezium 3.6 PostgresStreamingChangeEventSource#commitOffset): after Connect has
 * stored an offset, Debezium flushes its `lsn_commit` (else `lsn_proc`) to the slot, so the slot's
 * confirmed_flush_lsn trails or equals the stored offset. The server never streams from before
 * confirmed_flush_lsn. Hence:
 * - offset stored, slot missing: a new slot starts at the current end of WAL, so everything between
 *   the offset and now is gone. Older Debezium skipped it silently (DBZ-5739); 3.6.1 fails the task at
 *   start ("... no longer available on the server", seen on the local stack), which is loud but still
 *   a deploy that reports success and dies seconds later.
 * - slot's confirmed_flush_lsn past the offset: transactions committed in between are gone the same
 *   way. This is how a recreated slot, or one advanced by another consumer, looks.
 * - slot present, no offset for this connector: Debezium streams from wherever the slot stands. If the
 *   slot is not this connector's, that is an unknown position: old events again, or another consumer's
 *   slot taken over. A slot the connector itself created before its first offset flush is fine.
 * `--force` accepts the first two by resetting the stored offsets (the connector then streams from the
 * slot), and the third by streaming from the slot as it is.
 * restart_lsn is not compared: it is only where decoding restarts (the oldest running transaction),
 * always at or before confirmed_flush_lsn, and moving it loses nothing by itself.
 */

import { OutboxError } from '../errors';
import type { SlotRow } from '../watchdog/slot-query';

/** The connector's view of its slot: a projection of the one slot sample (src/watchdog/slot-query.ts), names as `connector:status --json` prints them. */
export type SlotInfo = Pick<SlotRow, 'slotName' | 'database' | 'plugin' | 'active' | 'activePid' | 'restartLsn' | 'confirmedFlushLsn' | 'walStatus'> & {
  /** PG17+: made as a failover slot (synchronized to standbys); null before 17. */
  failover?: boolean | null;
  /** SlotRow.retainedBytes: WAL the slot keeps on disk. */
  retainedWalBytes: number | null;
  /** SlotRow.flushLagBytes: WAL not yet confirmed by the connector. */
  confirmedLagBytes: number | null;
};

export type GuardCode =
  | 'slot-other-database'
  | 'slot-other-plugin'
  | 'slot-lost'
  | 'slot-without-offset'
  | 'offset-without-slot'
  | 'slot-ahead-of-offset'
  | 'rows-before-slot'
  | 'topic-compacted';

export interface GuardFinding {
  code: GuardCode;
  message: string;
}

export interface GuardInput {
  slotName: string;
  database: string;
  slot: SlotInfo | undefined;
  /** The stored offset of this connector's partition ({server: topic.prefix}), if there is one. */
  offset: Readonly<Record<string, unknown>> | undefined;
  /** `same-slot`: the connector exists and its stored config already uses this slot (it made it). */
  connector: 'absent' | 'same-slot' | 'other-slot';
  /**
   * Unpublished outbox rows while the slot does not exist yet (all of them predate it), when the
   * connector would not snapshot the table; undefined or 0 = none.
   */
  preSlotRows?: { count: number; table: string };
  /** The server's WAL timeline (database.ts readServerFacts): > 1 after a promotion or a point-in-time restore. */
  timeline?: number | null;
}

/** Whether a missing slot under a stored offset looks like a failover's loss: the server was promoted. */
export const promoted = (timeline: number | null | undefined): boolean => typeof timeline === 'number' && timeline > 1;

/** `16/B374D848` as a number of bytes. */
export function parseLsn(lsn: string): bigint {
  const match = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(lsn.trim());
  if (!match) throw new OutboxError('INTERNAL', `${JSON.stringify(lsn)} is not a PostgreSQL LSN (like 16/B374D848).`, { details: { lsn } });
  return (BigInt(`0x${match[1]}`) << 32n) + BigInt(`0x${match[2]}`);
}

export function formatLsn(value: bigint): string {
  return `${(value >> 32n).toString(16).toUpperCase()}/${(value & 0xffffffffn).toString(16).toUpperCase()}`;
}

/** The furthest position the stored offset vouches for: Debezium flushes lsn_commit, else lsn_proc, else lsn. */
export function offsetLsn(offset: Readonly<Record<string, unknown>> | undefined): bigint | undefined {
  if (!offset) return undefined;
  const values = ['lsn_commit', 'lsn_proc', 'lsn']
    .map((key) => offset[key])
    .filter((v): v is number | string => (typeof v === 'number' && Number.isFinite(v)) || (typeof v === 'string' && /^\d+$/.test(v)))
    .map((v) => BigInt(v));
  return values.length ? values.reduce((a, b) => (a > b ? a : b)) : undefined;
}

/** The offset of Debezium's partition `{server: <topic.prefix>}` among Connect's stored offsets. */
export function offsetForServer(
  offsets: ReadonlyArray<{ partition: Record<string, unknown>; offset: Record<string, unknown> }>,
  topicPrefix: string,
): Record<string, unknown> | undefined {
  return offsets.find((o) => o.partition?.server === topicPrefix)?.offset ?? undefined;
}

export function slotGuard(input: GuardInput): GuardFinding[] {
  const { slot, slotName } = input;
  const findings: GuardFinding[] = [];
  const stored = offsetLsn(input.offset);

  if (slot) {
    if (slot.database !== input.database) {
      findings.push({
        code: 'slot-other-database',
        message: `Slot "${slotName}" belongs to database ${slot.database ?? '(none: a physical slot)'}, not ${input.database}; slot names are cluster-wide. Choose another connector.slotName.`,
      });
    }
    if (slot.plugin !== null && slot.plugin !== 'pgoutput') {
      findings.push({ code: 'slot-other-plugin', message: `Slot "${slotName}" decodes with ${slot.plugin}, not pgoutput: it was made for something else.` });
    }
    if (slot.walStatus === 'lost') {
      findings.push({
        code: 'slot-lost',
        message:
          `Slot "${slotName}" is invalidated (wal_status=lost): PostgreSQL removed WAL it still needed (max_slot_wal_keep_size), so the connector cannot stream from it ` +
          'and the events in that WAL can only come from the outbox table. Recover with `outbox connector:deploy --resnapshot` (drops the slot and the stored offsets, ' +
          'then snapshots the outbox table: every row still in it is published again, the unread ones included; consumers drop the others by id), ' +
          'or hand over to the relay (`outbox relay`: it publishes every row with published_at NULL). Rows already deleted from the outbox ' +
          '(insert-then-delete writers, or cleaned up) cannot be recovered by either.',
      });
    }
  }
  if (slot && stored === undefined && input.connector !== 'same-slot') {
    const user = slot.active ? ` and is in use right now (walsender pid ${slot.activePid})` : '';
    findings.push({
      code: 'slot-without-offset',
      message:
        `Slot "${slotName}" already exists${user}, but this connector has no stored offset, so where it would start is unknown: ` +
        `it could re-publish events up to ${slot.confirmedFlushLsn ?? '?'} or take over another consumer's slot. ` +
        'Drop the slot if it is stale, or choose another connector.slotName.',
    });
  }
  if (!slot && input.preSlotRows && input.preSlotRows.count > 0) {
    const { count, table } = input.preSlotRows;
    findings.push({
      code: 'rows-before-slot',
      message:
        `${count} outbox row(s) in ${table} are unpublished (published_at IS NULL) and slot "${slotName}" does not exist yet: the connector starts at the ` +
        'current end of WAL (snapshot.mode=no_data), so rows committed before its slot are never published. Either let the relay publish them first ' +
        '(`outbox relay` until none is left unpublished, then stop it and deploy), or deploy with a snapshot of the outbox table ' +
        '(--force --set snapshot.mode=initial: every row still in the table is published, older ones included; consumers deduplicate by id). ' +
        'CDC never sets published_at: if an earlier connector already published these rows, delete them or deploy with --force.',
    });
  }
  if (!slot && stored !== undefined) {
    const failover = promoted(input.timeline)
      ? `SLOT_MISSING_AFTER_FAILOVER: this server is on WAL timeline ${input.timeline}, so it was promoted from a standby (or restored to a point in time), and a slot that is not ` +
        'a synchronized failover slot (PostgreSQL < 17, or connector.slotFailover off, or the standby not set up for slot sync) stays behind on the old primary. '
      : '';
    findings.push({
      code: 'offset-without-slot',
      message:
        `The connector has a stored offset (LSN ${formatLsn(stored)}) but slot "${slotName}" does not exist. ${failover}Debezium would create a new slot at the ` +
        'current end of WAL and silently skip every event written since that offset (DBZ-5739), so the deploy never recreates it by itself. ' +
        'Events committed after that LSN are still in the outbox table unless cleaned up: publish them with the relay (`outbox relay`, rows with published_at NULL; ' +
        'under CDC the cleanup deletes only what the slot confirmed) or re-snapshot (`outbox connector:deploy --resnapshot`: every row still in the table is published again, ' +
        'consumers drop duplicates by id). Find out who dropped the slot; to start over knowingly, delete the connector with --drop-slot (it also clears the offsets) and deploy again.',
    });
  }
  if (slot?.confirmedFlushLsn && stored !== undefined) {
    const flushed = parseLsn(slot.confirmedFlushLsn);
    if (flushed > stored) {
      findings.push({
        code: 'slot-ahead-of-offset',
        message:
          `Slot "${slotName}" has confirmed LSN ${slot.confirmedFlushLsn}, past the connector's stored offset ${formatLsn(stored)} by ${flushed - stored} bytes of WAL: ` +
          'transactions committed in between cannot be streamed any more (the slot was recreated or advanced by another consumer). ' +
          'Reconcile them; --force then resets the stored offsets and streams from the slot.',
      });
    }
  }
  return findings;
}

/**
 * A deploy that asks for a failover slot (slot.failover=true) while the slot already exists without it:
 * Debezium only sets failover when it creates the slot, so this slot would not survive a failover. Pure.
 */
export function failoverSlotWarning(slot: SlotInfo | undefined, wanted: boolean, connector: string): string | undefined {
  if (!wanted || !slot || slot.failover !== false) return undefined;
  return (
    `Slot "${slot.slotName}" exists without failover (pg_replication_slots.failover=false), but connector.slotFailover asks for a failover slot: Debezium does not alter ` +
    'an existing slot, so after a failover to a standby this slot is gone and the events after its position with it. Make it a failover slot (PostgreSQL 17): stop the connector ' +
    `(curl -X PUT <connect-url>/connectors/${connector}/stop), then over a replication connection run ` +
    `psql "dbname=<database> replication=database" -c 'ALTER_REPLICATION_SLOT ${slot.slotName} ( FAILOVER true )', then \`outbox connector:resume\`. ` +
    'Or drop and recreate it (connector:delete --drop-slot, then deploy; events committed while no slot exists must be published by the relay first, docs/connector.md, "Failover slots").'
  );
}
