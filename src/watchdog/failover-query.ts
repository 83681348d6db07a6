/**
 * What the failover rules (failover-rules.ts) read besides the slot sample (slot-query.ts): on the
 * primary, how many physical standbys stream from it and its WAL timeline; on a configured standby
 * (watchdog.standby.databaseUrl), its replication slots with PostgreSQL 17's slot-sync columns. Both
 * readable by a role with pg_monitor. `outbox status` reads the standby through the same query.
 */
import type { Client, PoolClient } from 'pg';

type Queryable = Pick<Client | PoolClient, 'query'>;

export interface PrimaryFailoverFacts {
  /**
   * Walsenders that are not logical decoding (no logical slot is theirs): physical standbys (and base
   * backups running now). null on a standby.
   */
  physicalStandbys: number | null;
  /** The WAL timeline: > 1 once the server was promoted (or restored to a point in time). null on a standby. */
  timeline: number | null;
}

/** One round trip; pg_walfile_name needs no privilege, and errors during recovery (hence the CASE). */
export const PRIMARY_FAILOVER_SQL = `
SELECT CASE WHEN pg_is_in_recovery() THEN NULL ELSE
         (SELECT count(*)::int FROM pg_stat_replication r
           WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots s WHERE s.active_pid = r.pid AND s.slot_type = 'logical')) END AS physical_standbys,
       CASE WHEN pg_is_in_recovery() THEN NULL
            ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END AS timeline`;

export async function readPrimaryFailoverFacts(client: Queryable): Promise<PrimaryFailoverFacts> {
  const { rows } = await client.query(PRIMARY_FAILOVER_SQL);
  const r = (rows[0] ?? {}) as { physical_standbys: number | null; timeline: number | null };
  return { physicalStandbys: r.physical_standbys ?? null, timeline: r.timeline ?? null };
}

export interface StandbySlotRow {
  slotName: string;
  slotType: string;
  /** PG17: maintained by the slot-sync worker from the primary's failover slot. */
  synced: boolean | null;
  temporary: boolean;
  /** PG17: why the slot is invalidated (wal_removed, rows_removed, wal_level_insufficient), or null. */
  invalidationReason: string | null;
  confirmedFlushLsn: string | null;
}

export interface StandbySample {
  versionNum: number;
  inRecovery: boolean;
  slots: StandbySlotRow[];
}

/** The standby's slots; a server before 17 has no sync columns (nothing is synced there: reported as null). */
export function standbySlotsSql(versionNum: number): string {
  const v17 = versionNum >= 170_000;
  return `
SELECT s.slot_name, s.slot_type, s.temporary, s.confirmed_flush_lsn::text AS confirmed_flush_lsn,
       ${v17 ? 's.synced' : 'NULL::boolean'} AS synced,
       ${v17 ? 's.invalidation_reason' : 'NULL::text'} AS invalidation_reason
FROM pg_replication_slots s
ORDER BY s.slot_name`;
}

export async function readStandbySlots(client: Queryable): Promise<StandbySample> {
  const head = await client.query("SELECT current_setting('server_version_num')::int AS version_num, pg_is_in_recovery() AS in_recovery");
  const h = head.rows[0] as { version_num: number; in_recovery: boolean };
  const { rows } = await client.query(standbySlotsSql(Number(h.version_num)));
  return {
    versionNum: Number(h.version_num),
    inRecovery: h.in_recovery === true,
    slots: (rows as Array<Record<string, unknown>>).map((r) => ({
      slotName: String(r.slot_name),
      slotType: String(r.slot_type),
      synced: (r.synced as boolean | null) ?? null,
      temporary: r.temporary === true,
      invalidationReason: (r.invalidation_reason as string | null) ?? null,
      confirmedFlushLsn: (r.confirmed_flush_lsn as string | null) ?? null,
    })),
  };
}
