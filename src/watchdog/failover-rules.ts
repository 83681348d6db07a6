/**
 * The failover rules (docs/watchdog.md, "Failover slots"). A logical slot lives on one server: after a
 * failover the promoted standby has it only if it was a PostgreSQL 17 failover slot that the standby's
 * slot-sync worker kept in step (sync_replication_slots=on). Without it the connector's position is gone
 * and Debezium would start a new slot at the end of WAL: every event in between is lost to CDC.
 * - FailoverSlotNotReady (critical): a failover slot of the primary that the standby (watchdog.standby)
 *   does not have ready: missing, not synced, temporary (a first sync not finished), or invalidated.
 * - SlotFailoverDisabled (warning): the connector's slot is not a failover slot on a 17+ primary that
 *   has physical standbys streaming: a failover would lose it.
 * - FailoverStandbyUnreadable (warning): the standby setting is given, but the standby cannot be read or
 *   is not in recovery: the rule above cannot be judged.
 * Pure: the poll reads the rows (failover-query.ts).
 */
import { parseLsn } from '../connector/slot-guard';
import type { Level } from './alert-state';
import type { PrimaryFailoverFacts, StandbySample } from './failover-query';
import type { SlotRow } from './slot-query';

export const FAILOVER_RULES = ['FailoverSlotNotReady', 'SlotFailoverDisabled', 'FailoverStandbyUnreadable'] as const;
export type FailoverRuleName = (typeof FAILOVER_RULES)[number];

/** PostgreSQL version from which slots can fail over. */
export const FAILOVER_VERSION = 170_000;

/** The standby as one poll saw it: a sample, or why there is none. `target` is host:port/database, no credentials. */
export interface StandbyRead {
  target: string;
  sample?: StandbySample;
  error?: string;
}

/** What the failover rules judge besides the slot sample. */
export interface FailoverFacts {
  primary: PrimaryFailoverFacts | null;
  /** Only when watchdog.standby.databaseUrl is set. */
  standby?: StandbyRead;
  /**
   * The LSN of the offset Connect holds for the connector, read only while the connector's slot is
   * missing: the signature of a failover without failover slots (SLOT_MISSING_AFTER_FAILOVER).
   */
  connectorOffsetLsn?: string;
}

export type Readiness = 'ready' | 'missing' | 'not-synced' | 'temporary' | 'invalidated';

export interface SlotReadiness {
  slotName: string;
  readiness: Readiness;
  synced: boolean | null;
  temporary: boolean | null;
  invalidationReason: string | null;
  /** The primary's confirmed_flush_lsn minus the standby copy's: how far the copy trails (null: unknown). */
  lagBytes: number | null;
}

const lsnBytes = (lsn: string | null): bigint | null => (lsn ? parseLsn(lsn) : null);

/** Each failover slot of the primary, as the standby has it. */
export function standbyReadiness(primarySlots: readonly SlotRow[], standby: StandbySample): SlotReadiness[] {
  const onStandby = new Map(standby.slots.map((s) => [s.slotName, s]));
  return primarySlots
    .filter((p) => p.failover === true)
    .map((p) => {
      const s = onStandby.get(p.slotName);
      if (!s) return { slotName: p.slotName, readiness: 'missing' as const, synced: null, temporary: null, invalidationReason: null, lagBytes: null };
      const readiness: Readiness = s.invalidationReason !== null ? 'invalidated' : s.temporary ? 'temporary' : s.synced !== true ? 'not-synced' : 'ready';
      const a = lsnBytes(p.confirmedFlushLsn);
      const b = lsnBytes(s.confirmedFlushLsn);
      return { slotName: p.slotName, readiness, synced: s.synced, temporary: s.temporary, invalidationReason: s.invalidationReason, lagBytes: a !== null && b !== null ? Number(a - b) : null };
    });
}

export interface FailoverVerdict {
  level: Level | undefined;
  summary: string;
}

const SYNC_SETUP =
  'On the standby: sync_replication_slots=on, hot_standby_feedback=on, a dbname in primary_conninfo and a physical primary_slot_name; on the primary: synchronized_standby_slots naming that physical slot (docs/watchdog.md, "Failover slots").';

export function evaluateFailoverSlot(r: SlotReadiness, standbyTarget: string): FailoverVerdict {
  const where = `on the standby ${standbyTarget}`;
  switch (r.readiness) {
    case 'ready':
      return { level: 'ok', summary: `Failover slot ${r.slotName} is synced ${where}${r.lagBytes === null ? '' : ` (${r.lagBytes} bytes behind the primary's confirmed position)`}.` };
    case 'missing':
      return {
        level: 'critical',
        summary: `Failover slot ${r.slotName} does not exist ${where}: after a failover to it the slot is gone and Debezium would start over at the end of WAL, losing the events in between. ${SYNC_SETUP}`,
      };
    case 'invalidated':
      return {
        level: 'critical',
        summary: `The copy of failover slot ${r.slotName} ${where} is invalidated (${r.invalidationReason}): after a failover it cannot stream. Fix the cause (wal_removed: max_slot_wal_keep_size; rows_removed: hot_standby_feedback=on), then drop it on the standby so the sync worker creates it again. ${SYNC_SETUP}`,
      };
    case 'temporary':
      return {
        level: 'critical',
        summary: `The copy of failover slot ${r.slotName} ${where} is still temporary: the sync worker has not made it persistent yet, so a failover now loses it. It turns persistent once the primary's slot has moved past the position the standby reserved for it, which needs its consumer (the connector) streaming; if the consumer streams and it stays, check ${SYNC_SETUP}`,
      };
    case 'not-synced':
      return {
        level: 'critical',
        summary: `Slot ${r.slotName} ${where} is not synced from the primary (synced=${String(r.synced)}): it was created on the standby itself, or the sync is not running; after a failover it does not hold the connector's position. Drop it on the standby. ${SYNC_SETUP}`,
      };
  }
}

/** SlotFailoverDisabled: judged on the connector's slot; undefined versionNum or facts = no verdict. */
export function evaluateFailoverDisabled(slot: SlotRow, versionNum: number | undefined, primary: PrimaryFailoverFacts | null, connector: string): FailoverVerdict {
  if (versionNum === undefined || primary === null || primary.physicalStandbys === null) return { level: undefined, summary: `Slot ${slot.slotName}: failover readiness unknown.` };
  if (versionNum < FAILOVER_VERSION) return { level: 'ok', summary: `Slot ${slot.slotName}: PostgreSQL before 17 has no failover slots.` };
  if (slot.failover !== false || primary.physicalStandbys === 0) {
    return { level: 'ok', summary: slot.failover ? `Slot ${slot.slotName} is a failover slot.` : `Slot ${slot.slotName} is not a failover slot, and no standby streams from this server.` };
  }
  return {
    level: 'warning',
    summary:
      `Slot ${slot.slotName} (the connector's) is not a failover slot (failover=false) on a PostgreSQL 17 primary that ${primary.physicalStandbys} standby(s) stream from: a failover would leave it behind, ` +
      `and the connector would have no position on the new primary (SLOT_MISSING_AFTER_FAILOVER). Set connector.slotFailover (auto or on), then make the slot a failover slot: ` +
      `stop the connector (PUT /connectors/${connector}/stop), run ALTER_REPLICATION_SLOT ${slot.slotName} ( FAILOVER true ) over a replication connection ` +
      `(psql "dbname=<database> replication=database"), and \`outbox connector:resume\` (docs/connector.md, "Failover slots").`,
  };
}

/** FailoverStandbyUnreadable: the standby read failed, or the server is not a standby. */
export function evaluateStandbyRead(read: StandbyRead): FailoverVerdict {
  if (read.error !== undefined) {
    return { level: 'warning', summary: `The standby ${read.target} (watchdog.standby.databaseUrl) cannot be read: ${read.error}. Whether the failover slots are ready there is unknown.` };
  }
  if (read.sample && !read.sample.inRecovery) {
    return {
      level: 'warning',
      summary: `${read.target} (watchdog.standby.databaseUrl) is not in recovery: it is a primary, not a standby (promoted?). Point the setting at the current standby.`,
    };
  }
  return { level: 'ok', summary: `The standby ${read.target} is readable.` };
}

/** The SlotMissing summary when Connect holds an offset for the missing connector slot. */
export function slotMissingAfterFailover(slotName: string, cluster: string, offsetLsn: string, timeline: number | null): string {
  const promoted = timeline !== null && timeline > 1 ? ` ${cluster} is on WAL timeline ${timeline}: it was promoted (or restored),` : '';
  return (
    `SLOT_MISSING_AFTER_FAILOVER: slot ${slotName}, the connector's, does not exist on ${cluster}, while Kafka Connect holds a stored offset (LSN ${offsetLsn}) for the connector.${promoted} ` +
    'A failover to a standby without a synced failover slot leaves the slot behind: the events committed after that LSN are not in any slot. ' +
    'Never let Debezium recreate the slot by itself (it would start at the end of WAL); publish those events from the outbox table with the relay ' +
    '(`outbox relay`) or `outbox connector:deploy --resnapshot`, then deploy; connector:deploy refuses meanwhile (docs/connector.md, "Failover slots").'
  );
}
