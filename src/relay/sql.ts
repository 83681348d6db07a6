import { qualified } from '../db';

/**
 * Every statement the relay runs, built once per table with escaped identifiers. Parameters are
 * positional; the shapes are documented on each builder and checked by test/unit/relay.
 */
export interface RelaySql {
  /** Columns the relay needs: a missing table or column fails here, before any work starts. */
  check: string;
  /**
   * $1 shard-lock namespace, $2 shard, $3 workers, $4 batch size, $5 blocked aggregate ids (text[]).
   * Takes the shard's transaction-level advisory lock first (an InitPlan evaluated once, before the scan),
   * so of several relay instances only one works a shard at a time; returns no rows when another holds it.
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
  /** Seconds since the oldest unpublished row was created; 0 when there is none. */
  lag: string;
  /** $1 membership namespace, $2 workers: a session-level shared lock that says "an instance with N workers runs". */
  join: string;
  /** $1 membership namespace: the shard counts of every running instance on this database and table. */
  members: string;
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

export function buildRelaySql(schema: string, table: string): RelaySql {
  const t = qualified(schema, table);
  const columns = 'id, aggregate_type, aggregate_id, event_type, payload, content_type, traceparent, headers, created_at, attempts';
  return {
    check: `SELECT ${columns}, published_at FROM ${t} LIMIT 0`,
    claim:
      `SELECT ${columns} FROM ${t} ` +
      'WHERE (SELECT pg_try_advisory_xact_lock(hashtext($1), $2)) ' +
      `AND published_at IS NULL AND ${SHARD_EXPRESSION} = $2 AND NOT (aggregate_id = ANY($5::text[])) ` +
      'ORDER BY created_at, id LIMIT $4 FOR UPDATE SKIP LOCKED',
    probe:
      `SELECT 1 FROM ${t} WHERE published_at IS NULL AND (hashtext(aggregate_id) & 2147483647) % $2 = $1 ` +
      'AND NOT (aggregate_id = ANY($3::text[])) LIMIT 1',
    mark:
      `UPDATE ${t} SET attempts = attempts + 1, published_at = CASE WHEN id = ANY($1::uuid[]) THEN now() ELSE NULL END ` +
      'WHERE id = ANY($2::uuid[]) AND published_at IS NULL',
    cleanup:
      `DELETE FROM ${t} WHERE id IN (SELECT id FROM ${t} ` +
      "WHERE published_at < now() - $1::float8 * interval '1 millisecond' LIMIT $2 FOR UPDATE SKIP LOCKED)",
    lag: `SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS seconds FROM ${t} WHERE published_at IS NULL`,
    join: 'SELECT pg_advisory_lock_shared(hashtext($1), $2)',
    members:
      'SELECT DISTINCT objid::bigint AS workers FROM pg_locks ' +
      "WHERE locktype = 'advisory' AND objsubid = 2 AND granted " +
      'AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) ' +
      'AND classid::bigint = (hashtext($1)::bigint & 4294967295)',
  };
}
