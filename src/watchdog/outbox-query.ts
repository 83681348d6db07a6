/**
 * The one way to sample the outbox table's health (docs/operations.md, "Outbox health"): the watchdog's
 * gauges and rules, `outbox status` and the relay's backlog gauge all read it through this module.
 *
 * Two statements, because they need different rights:
 * 1. the table's statistics: pg_stat_user_tables (n_live_tup, n_dead_tup, last (auto)vacuum), joined to
 *    pg_class by oid (reltuples) and pg_total_relation_size(relid), summed over the leaves of
 *    pg_partition_tree: a partitioned outbox's root has no statistics or storage of its own, its
 *    partitions do. For a partitioned outbox also the newest partition's upper bound (from its
 *    pg_get_expr(relpartbound)), the time left before INSERTs find no partition. Any role may read these,
 *    pg_monitor or not, and no USAGE on the schema is needed: the table is found by name in pg_class,
 *    never through a regclass cast (which would need USAGE);
 * 2. the rows still waiting (`published_at IS NULL`): the oldest one's age and, if asked, their count
 *    up to a cap. This reads the table, so the role needs USAGE on the schema and SELECT on the two
 *    columns; db:provision grants exactly that to the monitoring role (sql/roles.sql), nothing of the
 *    payload. Both use the partial index on (created_at) WHERE published_at IS NULL (migration 001):
 *    min() is one index probe; the count walks at most `cap` + 1 index entries, so its cost is bounded
 *    whatever the backlog.
 *
 * Under CDC (`cdcSlot` given) the relay's bookkeeping columns stay NULL, so "waiting" means "not
 * confirmed by the slot yet": rows of transactions at or after the newest mark the slot confirmed (its
 * snapshot_xmin, which the cleanup stores per slot, migration 012), or at or above the slot's floor
 * before any mark. Rows below that are read (and go at the next cleanup batches) or below the floor (the
 * cleanup cannot prove them read; `outbox outbox:cleanup --below-floor`): neither is a backlog. The
 * oldest is found through the (tx_id) WHERE published_at IS NULL index: the row of the lowest such tx_id,
 * one probe (xids are assigned at a transaction's first write, so this is the oldest writer up to the
 * length of a transaction). With no cleanup state for the slot (no cleanup has run), every row waits.
 * Under the polling relay it is the unpublished backlog. created_at is the writing transaction's start
 * (never a commit order), which is exact enough for an age measured in minutes.
 */
import type { Client, PoolClient } from 'pg';
import { pgCode, qualified } from '../db';
import { outboxCleanupTables } from '../provision/sql-files';

type Queryable = Pick<Client | PoolClient, 'query'>;

/**
 * Count waiting rows up to this many by default (status, relay); more shows as "at least". Measured on
 * the local stack with 200,000 waiting rows: 2.5 ms (p50) for 10,000, 31 ms for 100,000.
 */
export const DEFAULT_BACKLOG_CAP = 10_000;

export interface OutboxTableSample {
  /** `schema.table` as configured (unescaped, for display and labels). */
  table: string;
  /** False when the table does not exist (the database is not provisioned): every value is null. */
  present: boolean;
  /** n_live_tup (the statistics collector's estimate), else pg_class.reltuples when analysed. */
  estimatedRows: number | null;
  /** pg_total_relation_size: heap, indexes and TOAST. */
  totalBytes: number | null;
  deadTuples: number | null;
  /** Epoch ms; null when never. */
  lastAutovacuumMs: number | null;
  lastVacuumMs: number | null;
  /** Age of the oldest row with published_at IS NULL, seconds; 0 when none waits; null when unreadable. */
  oldestPendingAgeSeconds: number | null;
  /** Rows with published_at IS NULL, counted up to the cap; null when not counted or unreadable. */
  pendingRows: number | null;
  /** pendingRows stopped at the cap: there are at least that many. */
  pendingCapped: boolean;
  /** Why the waiting rows could not be read (e.g. the role lacks SELECT on them); null when they were. */
  pendingError: string | null;
  /** Server clock when sampled, epoch ms. */
  sampledAtMs: number;
  /**
   * A partitioned outbox (outbox.cleanupMode 'partition'): how long from now rows still have a partition
   * to go to (the newest partition's upper bound − now), seconds; past it every outbox INSERT fails. Null
   * for a plain table. Sizes and rows above are then the sums over the partitions.
   */
  partitionHeadroomSeconds: number | null;
}

export interface SampleOutboxOptions {
  schema: string;
  table: string;
  /** Count waiting rows up to this many; 0 = do not count (the watchdog's poll stays one index probe). */
  backlogCap?: number;
  /** CDC: the connector's slot; waiting then means "not confirmed by this slot yet" (see above). */
  cdcSlot?: string;
}

export const outboxStatsSql = `
SELECT sum(s.n_live_tup)::float8 AS n_live_tup, sum(c.reltuples)::float8 AS reltuples, sum(s.n_dead_tup)::float8 AS n_dead_tup,
       sum(pg_total_relation_size(s.relid))::float8 AS total_bytes,
       (extract(epoch FROM max(s.last_autovacuum)) * 1000)::float8 AS last_autovacuum_ms,
       (extract(epoch FROM max(s.last_vacuum)) * 1000)::float8 AS last_vacuum_ms,
       (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS sampled_at_ms,
       bool_or(p.relkind = 'p') AS partitioned,
       (SELECT max(('x' || left(replace(m[1], '-', ''), 12))::bit(48)::bigint)
          FROM pg_inherits i JOIN pg_class pc ON pc.oid = i.inhrelid,
               regexp_match(pg_get_expr(pc.relpartbound, pc.oid), 'TO \\(''([0-9a-f-]{36})''\\)') m
         WHERE i.inhparent = min(p.oid::bigint)::oid)::float8 AS partitions_until_ms
  FROM pg_class p JOIN pg_namespace n ON n.oid = p.relnamespace
  -- pg_partition_tree returns no rows for a plain table: the table itself is its one leaf.
  CROSS JOIN LATERAL (SELECT t.relid FROM pg_partition_tree(p.oid) t WHERE p.relkind = 'p' AND t.isleaf UNION ALL SELECT p.oid WHERE p.relkind = 'r') t
  JOIN pg_stat_user_tables s ON s.relid = t.relid
  JOIN pg_class c ON c.oid = s.relid
 WHERE n.nspname = $1 AND p.relname = $2 AND p.relkind IN ('r', 'p')
HAVING count(*) > 0 OR bool_or(p.relkind = 'p')`;

/**
 * The oldest waiting row's age and (cap > 0) their count up to `cap` + 1, from the partial index. `$1`
 * is the cap; `${table}` an escaped, schema-qualified identifier.
 */
export const outboxPendingSql = (table: string, count: boolean): string => `
SELECT COALESCE(extract(epoch FROM now() - (SELECT min(created_at) FROM ${table} WHERE published_at IS NULL)), 0)::float8 AS oldest_age_s,
       ${count ? `(SELECT count(*) FROM (SELECT 1 FROM ${table} WHERE published_at IS NULL LIMIT $1::bigint + 1) w)` : 'NULL'}::float8 AS pending`;

/**
 * Under CDC: `$1` is the slot, `$2` the cap; `${slots}` the cleanup's per-slot table. Without a row for the slot the
 * plain query's answer; with one, the rows at or after the slot's confirmed position.
 */
export const outboxCdcPendingSql = (table: string, slots: string, count: boolean): string => `
WITH w AS (SELECT GREATEST(s.safe_xmin, s.floor_tx_id) AS from_tx FROM ${slots} s WHERE s.slot_name = $1::text)
SELECT CASE WHEN (SELECT from_tx FROM w) IS NULL
            THEN COALESCE(extract(epoch FROM now() - (SELECT min(created_at) FROM ${table} WHERE published_at IS NULL)), 0)
            ELSE COALESCE(extract(epoch FROM now() - (SELECT o.created_at FROM ${table} o WHERE o.published_at IS NULL AND o.tx_id >= (SELECT from_tx FROM w) ORDER BY o.tx_id LIMIT 1)), 0)
       END::float8 AS oldest_age_s,
       ${
         count
           ? `CASE WHEN (SELECT from_tx FROM w) IS NULL
            THEN (SELECT count(*) FROM (SELECT 1 FROM ${table} WHERE published_at IS NULL LIMIT $2::bigint + 1) a)
            ELSE (SELECT count(*) FROM (SELECT 1 FROM ${table} o WHERE o.published_at IS NULL AND o.tx_id >= (SELECT from_tx FROM w) LIMIT $2::bigint + 1) b)
       END`
           : 'NULL'
       }::float8 AS pending`;

const num = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value));

/** The oldest waiting row's age and the capped count (the relay's gauges). Throws what the query throws. */
export async function readPending(client: Queryable, options: SampleOutboxOptions): Promise<Pick<OutboxTableSample, 'oldestPendingAgeSeconds' | 'pendingRows' | 'pendingCapped'>> {
  const cap = options.backlogCap ?? 0;
  const table = qualified(options.schema, options.table);
  const { rows } = options.cdcSlot
    ? await client.query(outboxCdcPendingSql(table, outboxCleanupTables(options).slots, cap > 0), cap > 0 ? [options.cdcSlot, cap] : [options.cdcSlot])
    : await client.query(outboxPendingSql(table, cap > 0), cap > 0 ? [cap] : []);
  const row = (rows[0] ?? {}) as Record<string, unknown>;
  const pending = num(row.pending);
  return {
    oldestPendingAgeSeconds: Math.max(0, num(row.oldest_age_s) ?? 0),
    pendingRows: pending === null ? null : Math.min(pending, cap),
    pendingCapped: pending !== null && pending > cap,
  };
}

/** Seconds from `nowMs` to the newest partition's upper bound; 0 when there is none, or it is past. */
const headroom = (untilMs: number | null, nowMs: number): number => Math.max(0, ((untilMs ?? nowMs) - nowMs) / 1000);

/** pg: undefined_table, invalid_schema_name (dropped between the two statements), insufficient_privilege. */
const UNREADABLE = new Set(['42P01', '3F000', '42501']);

/**
 * Samples the outbox table. A missing table is `present: false`; waiting rows the role may not read
 * leave their fields null with `pendingError` set (the statistics still count). Other errors throw.
 */
export async function sampleOutbox(client: Queryable, options: SampleOutboxOptions): Promise<OutboxTableSample> {
  const base: OutboxTableSample = {
    table: `${options.schema}.${options.table}`,
    present: false,
    estimatedRows: null,
    totalBytes: null,
    deadTuples: null,
    lastAutovacuumMs: null,
    lastVacuumMs: null,
    oldestPendingAgeSeconds: null,
    pendingRows: null,
    pendingCapped: false,
    pendingError: null,
    sampledAtMs: Date.now(),
    partitionHeadroomSeconds: null,
  };
  const { rows } = await client.query(outboxStatsSql, [options.schema, options.table]);
  const stats = rows[0] as Record<string, unknown> | undefined;
  if (!stats) return base;
  const reltuples = num(stats.reltuples);
  const sample: OutboxTableSample = {
    ...base,
    present: true,
    // n_live_tup is 0 after a statistics reset and reltuples -1 before the first ANALYZE (PG14+).
    estimatedRows: num(stats.n_live_tup) ?? (reltuples !== null && reltuples >= 0 ? reltuples : null),
    totalBytes: num(stats.total_bytes),
    deadTuples: num(stats.n_dead_tup),
    lastAutovacuumMs: num(stats.last_autovacuum_ms),
    lastVacuumMs: num(stats.last_vacuum_ms),
    sampledAtMs: num(stats.sampled_at_ms) ?? base.sampledAtMs,
    partitionHeadroomSeconds: stats.partitioned === true ? headroom(num(stats.partitions_until_ms), num(stats.sampled_at_ms) ?? base.sampledAtMs) : null,
  };
  try {
    return { ...sample, ...(await readPending(client, options)) };
  } catch (error) {
    const code = pgCode(error);
    if (!code || !UNREADABLE.has(code)) throw error;
    const why =
      code === '42501'
        ? `the role may not read ${sample.table} (${(error as Error).message}); \`outbox db:provision\` grants the monitoring role USAGE on the schema and SELECT (created_at, published_at, tx_id), and under CDC SELECT on the cleanup's slot table`
        : `${sample.table} disappeared while being sampled`;
    return { ...sample, pendingError: why };
  }
}
