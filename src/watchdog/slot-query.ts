/**
 * The watchdog's SQL, per server version (the columns each version has are listed in docs/watchdog.md, "How it works"). One round trip per poll: the slots,
 * the current LSN (standby-safe: pg_current_wal_lsn() errors during recovery) and the server clock.
 * On a primary the current LSN is the insert position, as pgMonitor uses: WAL a stuck slot pins is
 * counted as soon as it is generated, not up to wal_writer_delay later when it is written out (that
 * delay alone could cost a poll interval of detection time). The difference is in-flight WAL only.
 * Columns a version lacks come back as NULL so the row type is version-independent. Everything here
 * is readable by a role with pg_monitor (pg_stat_replication's details need pg_read_all_stats).
 */
import type { Client, PoolClient } from 'pg';

type Queryable = Pick<Client | PoolClient, 'query'>;

export interface SlotRow {
  slotName: string;
  slotType: string;
  plugin: string | null;
  database: string | null;
  temporary: boolean;
  active: boolean;
  activePid: number | null;
  xminAge: number | null;
  catalogXminAge: number | null;
  restartLsn: string | null;
  confirmedFlushLsn: string | null;
  /** Byte positions (LSN − 0/0) for arithmetic across polls. */
  restartPos: number | null;
  confirmedPos: number | null;
  retainedBytes: number | null;
  flushLagBytes: number | null;
  restartToConfirmedBytes: number | null;
  /** PG13+: reserved | extended | unreserved | lost. */
  walStatus: string | null;
  /** PG13+, and only trusted when restart_lsn is set (a known PG bug reports it otherwise). */
  safeWalSize: number | null;
  twoPhase: boolean | null;
  conflicting: boolean | null;
  invalidationReason: string | null;
  /** PG17+: when the slot became inactive (epoch ms). */
  inactiveSinceMs: number | null;
  failover: boolean | null;
  synced: boolean | null;
  applicationName: string | null;
  clientAddr: string | null;
  walsenderState: string | null;
  sendLagBytes: number | null;
  replyAgeSeconds: number | null;
}

export interface SlotSample {
  /** Server clock (clock_timestamp()) when sampled, epoch ms. */
  sampledAtMs: number;
  inRecovery: boolean;
  currentLsn: string | null;
  currentPos: number | null;
  slots: SlotRow[];
}

export interface ServerSettings {
  versionNum: number;
  /** -1 = unlimited (the default). */
  maxSlotWalKeepBytes: number | null;
  walKeepBytes: number | null;
  maxWalBytes: number | null;
  walSegmentBytes: number;
  walSenderTimeoutMs: number | null;
}

export const SETTINGS_SQL = `
SELECT current_setting('server_version_num')::int AS version_num,
       (SELECT CASE WHEN setting::bigint < 0 THEN -1 ELSE setting::bigint * 1024 * 1024 END FROM pg_settings WHERE name = 'max_slot_wal_keep_size') AS max_slot_wal_keep_bytes,
       (SELECT setting::bigint * 1024 * 1024 FROM pg_settings WHERE name = 'wal_keep_size') AS wal_keep_bytes,
       (SELECT setting::bigint * 1024 * 1024 FROM pg_settings WHERE name = 'max_wal_size') AS max_wal_bytes,
       (SELECT setting::bigint FROM pg_settings WHERE name = 'wal_segment_size') AS wal_segment_bytes,
       (SELECT setting::bigint FROM pg_settings WHERE name = 'wal_sender_timeout') AS wal_sender_timeout_ms`;

/** The hot query for one server version (13–17; 18+ uses the 17 form). */
export function slotQuerySql(versionNum: number): string {
  const v = Math.floor(versionNum / 10_000);
  const col = (since: number, expr: string, type: string, alias: string) => (v >= since ? `${expr} AS ${alias}` : `NULL::${type} AS ${alias}`);
  return `
WITH c AS (
  SELECT pg_is_in_recovery() AS in_recovery,
         CASE WHEN pg_is_in_recovery()
              THEN GREATEST(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())
              ELSE pg_current_wal_insert_lsn() END AS cur_lsn,
         clock_timestamp() AS sampled_at
)
SELECT s.slot_name, s.slot_type, s.plugin, s.database, s.temporary,
       s.active, s.active_pid,
       age(s.xmin) AS xmin_age, age(s.catalog_xmin) AS catalog_xmin_age,
       s.restart_lsn::text AS restart_lsn, s.confirmed_flush_lsn::text AS confirmed_flush_lsn,
       pg_wal_lsn_diff(s.restart_lsn, '0/0')::text AS restart_pos,
       pg_wal_lsn_diff(s.confirmed_flush_lsn, '0/0')::text AS confirmed_pos,
       pg_wal_lsn_diff(c.cur_lsn, s.restart_lsn)::bigint AS retained_bytes,
       pg_wal_lsn_diff(c.cur_lsn, s.confirmed_flush_lsn)::bigint AS flush_lag_bytes,
       pg_wal_lsn_diff(s.confirmed_flush_lsn, s.restart_lsn)::bigint AS restart_to_confirmed_bytes,
       ${col(13, 's.wal_status', 'text', 'wal_status')},
       ${col(13, 'CASE WHEN s.restart_lsn IS NOT NULL THEN s.safe_wal_size END', 'bigint', 'safe_wal_size')},
       ${col(14, 's.two_phase', 'boolean', 'two_phase')},
       ${col(16, 's.conflicting', 'boolean', 'conflicting')},
       ${col(17, 's.invalidation_reason', 'text', 'invalidation_reason')},
       ${col(17, '(extract(epoch FROM s.inactive_since) * 1000)::float8', 'float8', 'inactive_since_ms')},
       ${col(17, 's.failover', 'boolean', 'failover')},
       ${col(17, 's.synced', 'boolean', 'synced')},
       r.application_name, r.client_addr::text AS client_addr, r.state AS walsender_state,
       pg_wal_lsn_diff(c.cur_lsn, r.sent_lsn)::bigint AS send_lag_bytes,
       extract(epoch FROM c.sampled_at - r.reply_time)::float8 AS reply_age_s,
       c.in_recovery, c.cur_lsn::text AS cur_lsn, pg_wal_lsn_diff(c.cur_lsn, '0/0')::text AS cur_pos,
       (extract(epoch FROM c.sampled_at) * 1000)::float8 AS sampled_at_ms
FROM c
LEFT JOIN pg_replication_slots s ON true
LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
ORDER BY s.slot_name`;
}

const num = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value));

type Row = Record<string, unknown>;

/** Parses the hot query's rows; a server without slots still yields one row (LEFT JOIN) with the LSN. */
export function parseSlotRows(rows: Row[]): SlotSample {
  const first = rows[0] ?? {};
  return {
    sampledAtMs: num(first.sampled_at_ms) ?? Date.now(),
    inRecovery: first.in_recovery === true,
    currentLsn: (first.cur_lsn as string | null) ?? null,
    currentPos: num(first.cur_pos),
    slots: rows
      .filter((r) => r.slot_name !== null && r.slot_name !== undefined)
      .map((r) => ({
        slotName: String(r.slot_name),
        slotType: String(r.slot_type),
        plugin: (r.plugin as string | null) ?? null,
        database: (r.database as string | null) ?? null,
        temporary: r.temporary === true,
        active: r.active === true,
        activePid: num(r.active_pid),
        xminAge: num(r.xmin_age),
        catalogXminAge: num(r.catalog_xmin_age),
        restartLsn: (r.restart_lsn as string | null) ?? null,
        confirmedFlushLsn: (r.confirmed_flush_lsn as string | null) ?? null,
        restartPos: num(r.restart_pos),
        confirmedPos: num(r.confirmed_pos),
        retainedBytes: num(r.retained_bytes),
        flushLagBytes: num(r.flush_lag_bytes),
        restartToConfirmedBytes: num(r.restart_to_confirmed_bytes),
        walStatus: (r.wal_status as string | null) ?? null,
        safeWalSize: num(r.safe_wal_size),
        twoPhase: (r.two_phase as boolean | null) ?? null,
        conflicting: (r.conflicting as boolean | null) ?? null,
        invalidationReason: (r.invalidation_reason as string | null) ?? null,
        inactiveSinceMs: num(r.inactive_since_ms),
        failover: (r.failover as boolean | null) ?? null,
        synced: (r.synced as boolean | null) ?? null,
        applicationName: (r.application_name as string | null) ?? null,
        clientAddr: (r.client_addr as string | null) ?? null,
        walsenderState: (r.walsender_state as string | null) ?? null,
        sendLagBytes: num(r.send_lag_bytes),
        replyAgeSeconds: num(r.reply_age_s),
      })),
  };
}

export async function readSettings(client: Queryable): Promise<ServerSettings> {
  const { rows } = await client.query(SETTINGS_SQL);
  const r = rows[0] as Row;
  return {
    versionNum: Number(r.version_num),
    maxSlotWalKeepBytes: num(r.max_slot_wal_keep_bytes),
    walKeepBytes: num(r.wal_keep_bytes),
    maxWalBytes: num(r.max_wal_bytes),
    walSegmentBytes: num(r.wal_segment_bytes) ?? 16 * 1024 * 1024,
    walSenderTimeoutMs: num(r.wal_sender_timeout_ms),
  };
}

export async function readSlots(client: Queryable, versionNum: number): Promise<SlotSample> {
  const { rows } = await client.query(slotQuerySql(versionNum));
  return parseSlotRows(rows as Row[]);
}

const versions = new WeakMap<object, number>();

/**
 * The one way to sample replication slots: the watchdog, `outbox status` and the connector commands all
 * read pg_replication_slots through this query and row type. The server version (which columns exist)
 * is read once per client unless given.
 */
export async function sampleSlots(client: Queryable, versionNum?: number): Promise<SlotSample> {
  let version = versionNum ?? versions.get(client);
  if (version === undefined) {
    const { rows } = await client.query("SELECT current_setting('server_version_num')::int AS version_num");
    version = Number((rows[0] as Row).version_num);
    versions.set(client, version);
  }
  return readSlots(client, version);
}
