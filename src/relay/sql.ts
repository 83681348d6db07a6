import { qualified } from '../db';
import { OUTBOX_COLUMNS } from '../envelope';

/**
 * Every statement the relay runs, built once per table with escaped identifiers. Parameters are
 * positional; the shapes are documented on each builder and checked by test/unit/relay.
 */
export interface RelaySql {
  /** Columns the relay needs: a missing table or column fails here, before any work starts. */
  check: string;
  /**
   * $1 shard-lock namespace, $2 shard, $3 workers, $4 batch size, $5 blocked aggregate ids (text[]),
   * $6 byte budget. Takes the shard's transaction-level advisory lock first (an InitPlan evaluated once,
   * before the scan), so of several relay instances only one works a shard at a time; returns no rows when
   * another holds it. Then, in `seq` order:
   * 1. candidates: at most $4 unpublished rows of the shard, with the bytes of the rows before each one;
   * 2. budget: the prefix whose earlier rows stay under $6 bytes (always the first row, so one batch holds
   *    at most the budget plus one row);
   * 3. claimed: those rows locked FOR UPDATE SKIP LOCKED (re-checking published_at);
   * 4. a row is returned only if no earlier row of its aggregate among the candidates was skipped (locked
   *    by another session): SKIP LOCKED must not let a later event of a key overtake an earlier one.
   */
  claim: string;
  /**
   * $1 shard, $2 workers, $3 blocked aggregate ids: one statement, no transaction, that tells an idle worker
   * whether its shard has anything to claim (an idle poll costs 1 statement instead of BEGIN, claim, COMMIT).
   */
  probe: string;
  /** $1 published ids, $2 every id attempted (published or failed): attempts + 1, published_at set on success. */
  mark: string;
  /** $1 retention in ms, $2 batch size: deletes at most one batch of published rows older than retention. */
  cleanup: string;
  /** $1 membership namespace, $2 workers: a session-level shared lock that says "an instance with N workers runs". */
  join: string;
  /** $1 membership namespace: the shard counts of every running instance on this database and table. */
  members: string;
  /** $1 schema, $2 table, $3 trigger name: `present` is true when the outbox has that trigger (relay.notify). */
  notifyTrigger: string;
}

/** Advisory-lock namespaces (hashed with hashtext in SQL) of one outbox table. */
export function lockNamespaces(schema: string, table: string): { shards: string; members: string } {
  const name = `${schema}.${table}`;
  return { shards: `outbox-relay:shards:${name}`, members: `outbox-relay:members:${name}` };
}

/**
 * The shard of an aggregate: `hashtext(aggregate_id)` with the sign bit cleared (abs() overflows on
 * -2^31), modulo the worker count. Events of one aggregate always land in one shard.
 */
export const SHARD_EXPRESSION = '(hashtext(aggregate_id) & 2147483647) % $3';

/**
 * Bytes of the record a row becomes, counted as `recordBytes` (src/relay/records.ts) counts them: 64 of
 * framing, key, value, and 8 + name + value per header (`id` 2+36, `eventType` 9, `contentType` 11,
 * `traceparent` 11 and `headers` 7 only when not NULL). octet_length reads a TOASTed value's size from its
 * pointer, without fetching the value.
 */
export const ROW_BYTES_EXPRESSION =
  '(146 + octet_length(aggregate_id) + octet_length(payload) + octet_length(event_type) + octet_length(content_type)' +
  ' + COALESCE(19 + octet_length(traceparent), 0) + COALESCE(15 + octet_length(headers), 0))::bigint';

export function buildRelaySql(schema: string, table: string): RelaySql {
  const t = qualified(schema, table);
  const columns = [...OUTBOX_COLUMNS, 'created_at', 'attempts'].join(', ');
  return {
    check: `SELECT ${columns}, seq, published_at FROM ${t} LIMIT 0`,
    claim:
      'WITH candidates AS (' +
      `SELECT id, aggregate_id, seq, sum(${ROW_BYTES_EXPRESSION}) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) - ${ROW_BYTES_EXPRESSION} AS bytes_before ` +
      `FROM ${t} WHERE (SELECT pg_try_advisory_xact_lock(hashtext($1), $2)) ` +
      `AND published_at IS NULL AND ${SHARD_EXPRESSION} = $2 AND NOT (aggregate_id = ANY($5::text[])) ` +
      'ORDER BY seq LIMIT $4), ' +
      'budget AS MATERIALIZED (SELECT id, aggregate_id, seq FROM candidates WHERE bytes_before < $6::bigint), ' +
      `claimed AS MATERIALIZED (SELECT ${columns}, seq FROM ${t} WHERE id = ANY(ARRAY(SELECT id FROM budget)) AND published_at IS NULL FOR UPDATE SKIP LOCKED), ` +
      'skipped AS (SELECT aggregate_id, min(seq) AS seq FROM budget WHERE id NOT IN (SELECT id FROM claimed) GROUP BY aggregate_id) ' +
      `SELECT ${columns.split(', ').map((c) => `c.${c}`).join(', ')} FROM claimed c LEFT JOIN skipped s ON s.aggregate_id = c.aggregate_id ` +
      'WHERE s.seq IS NULL OR c.seq < s.seq ORDER BY c.seq',
    probe:
      `SELECT 1 FROM ${t} WHERE published_at IS NULL AND (hashtext(aggregate_id) & 2147483647) % $2 = $1 ` +
      'AND NOT (aggregate_id = ANY($3::text[])) LIMIT 1',
    mark:
      `UPDATE ${t} SET attempts = attempts + 1, published_at = CASE WHEN id = ANY($1::uuid[]) THEN now() ELSE NULL END ` +
      'WHERE id = ANY($2::uuid[]) AND published_at IS NULL',
    cleanup:
      `DELETE FROM ${t} WHERE id IN (SELECT id FROM ${t} ` +
      "WHERE published_at < now() - $1::float8 * interval '1 millisecond' LIMIT $2 FOR UPDATE SKIP LOCKED)",
    join: 'SELECT pg_advisory_lock_shared(hashtext($1), $2)',
    members:
      'SELECT DISTINCT objid::bigint AS workers FROM pg_locks ' +
      "WHERE locktype = 'advisory' AND objsubid = 2 AND granted " +
      'AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) ' +
      'AND classid::bigint = (hashtext($1)::bigint & 4294967295)',
    notifyTrigger:
      'SELECT EXISTS (SELECT 1 FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace ' +
      'WHERE n.nspname = $1 AND c.relname = $2 AND g.tgname = $3 AND g.tgenabled <> \'D\') AS present',
  };
}
