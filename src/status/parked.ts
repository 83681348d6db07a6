import type { OutboxConfig } from '../config';
import { clientConfig, pgCode, qualified, withClient } from '../db';
import { parkedTableName } from '../provision/sql-files';
import type { ParkedData, ParkedKey } from './types';

export const DEFAULT_PARKED_LIMIT = 10;

/**
 * Parked keys, the most events first, with each key's head (its smallest seq: the event a replay must
 * apply first) and the totals over every key. One statement: the totals are window functions over the
 * grouped keys, computed before the LIMIT. `${table}` is an escaped, schema-qualified identifier.
 */
export const parkedSql = (table: string): string => `
SELECT consumer, aggregate_type, aggregate_id,
       count(*)::bigint                            AS events,
       (array_agg(event_id ORDER BY seq))[1]       AS head_event_id,
       (array_agg(error_code ORDER BY seq))[1]     AS head_error_code,
       min(parked_at)                              AS since,
       count(*) OVER ()                            AS total_keys,
       sum(count(*)) OVER ()                       AS total_events,
       min(min(parked_at)) OVER ()                 AS oldest,
       (EXTRACT(EPOCH FROM now() - min(min(parked_at)) OVER ()) * 1000)::float8 AS oldest_age_ms
  FROM ${table}
 GROUP BY consumer, aggregate_type, aggregate_id
 ORDER BY events DESC, since, consumer, aggregate_type, aggregate_id
 LIMIT $1`;

/** pg: undefined_table, invalid_schema_name. The database is not provisioned (yet): nothing is parked. */
const NOT_PROVISIONED = new Set(['42P01', '3F000']);

export async function readParked(config: OutboxConfig, timeoutMs: number, limit = DEFAULT_PARKED_LIMIT): Promise<ParkedData> {
  const table = qualified(config.outbox.schema, parkedTableName(config.outbox.inboxTable));
  const settings = clientConfig(config.database, { application_name: 'outbox-router status', connectionTimeoutMillis: timeoutMs, statement_timeout: timeoutMs });
  const empty = { table, totalKeys: 0, totalEvents: 0, oldestSince: null, oldestAgeMs: null, limit, keys: [] as ParkedKey[] };
  try {
    const rows = await withClient(settings, async (client) => {
      const result = await client.query<{
        consumer: string;
        aggregate_type: string;
        aggregate_id: string;
        events: string;
        head_event_id: string;
        head_error_code: string;
        since: Date;
        total_keys: string;
        total_events: string;
        oldest: Date;
        oldest_age_ms: number;
      }>(parkedSql(table), [limit]);
      return result.rows;
    });
    return {
      ...empty,
      provisioned: true,
      totalKeys: Number(rows[0]?.total_keys ?? 0),
      totalEvents: Number(rows[0]?.total_events ?? 0),
      oldestSince: rows[0] ? rows[0].oldest.toISOString() : null,
      oldestAgeMs: rows[0] ? Math.max(0, Math.round(rows[0].oldest_age_ms)) : null,
      keys: rows.map((r) => ({
        consumer: r.consumer,
        aggregateType: r.aggregate_type,
        aggregateId: r.aggregate_id,
        events: Number(r.events),
        headEventId: r.head_event_id,
        headErrorCode: r.head_error_code,
        since: r.since.toISOString(),
      })),
    };
  } catch (error) {
    if (NOT_PROVISIONED.has(pgCode(error) ?? '')) return { ...empty, provisioned: false };
    throw error;
  }
}
