/**
 * Does the publication still publish inserts of the outbox table? The one home of that check, used by
 * connector:deploy (refuses), connector:status (reports) and the watchdog (PublicationDrift).
 *
 * Why it needs watching: `ALTER PUBLICATION … SET (publish = 'update')`, `… DROP TABLE outbox` or a row
 * filter (PG15+) stop pgoutput from decoding outbox inserts, yet the heartbeat table keeps the slot's
 * confirmed position moving: every slot alert stays green while events are lost.
 *
 * One query, readable by any role (pg_monitor is not even needed): pg_publication for the publication
 * and its `pubinsert` flag, pg_publication_tables for the table. That view expands FOR ALL TABLES and
 * (PG15+) FOR TABLES IN SCHEMA publications, so puballtables needs no case of its own. `rowfilter` is
 * read through to_jsonb so the same SQL runs on PostgreSQL 13–17 (the column exists from 15).
 */
import type { Client, PoolClient } from 'pg';

type Queryable = Pick<Client | PoolClient, 'query'>;

export interface PublicationTarget {
  publication: string;
  schema: string;
  table: string;
}

export interface PublicationCheck extends PublicationTarget {
  /** True when inserts of the table are decoded, unfiltered. */
  ok: boolean;
  exists: boolean;
  pubinsert: boolean | null;
  puballtables: boolean | null;
  tablePublished: boolean;
  rowFilter: string | null;
  /** What is wrong, one sentence each; empty when ok. */
  problems: string[];
}

export const PUBLICATION_CHECK_SQL = `
SELECT p.pubinsert, p.puballtables,
       t.tablename IS NOT NULL AS table_published,
       to_jsonb(t) ->> 'rowfilter' AS rowfilter
  FROM pg_publication p
  LEFT JOIN pg_publication_tables t ON t.pubname = p.pubname AND t.schemaname = $2 AND t.tablename = $3
 WHERE p.pubname = $1`;

/** Judges the row of PUBLICATION_CHECK_SQL (undefined: no such publication). Pure. */
export function judgePublication(
  target: PublicationTarget,
  row: { pubinsert: boolean; puballtables: boolean; table_published: boolean; rowfilter: string | null } | undefined,
): PublicationCheck {
  const name = `"${target.publication}"`;
  const table = `${target.schema}.${target.table}`;
  if (!row) {
    return {
      ...target,
      ok: false,
      exists: false,
      pubinsert: null,
      puballtables: null,
      tablePublished: false,
      rowFilter: null,
      problems: [`publication ${name} does not exist, so nothing is decoded`],
    };
  }
  const problems: string[] = [];
  if (!row.pubinsert) problems.push(`publication ${name} does not publish inserts (pubinsert = false: someone ran ALTER PUBLICATION … SET (publish = …) without 'insert')`);
  if (!row.table_published) problems.push(`publication ${name} does not publish the outbox table ${table} (it was removed from the publication)`);
  else if (row.rowfilter) problems.push(`publication ${name} publishes ${table} only WHERE ${row.rowfilter}: other rows are never decoded`);
  return {
    ...target,
    ok: problems.length === 0,
    exists: true,
    pubinsert: row.pubinsert,
    puballtables: row.puballtables,
    tablePublished: row.table_published,
    rowFilter: row.rowfilter,
    problems,
  };
}

export async function checkPublication(client: Queryable, target: PublicationTarget): Promise<PublicationCheck> {
  const { rows } = await client.query(PUBLICATION_CHECK_SQL, [target.publication, target.schema, target.table]);
  return judgePublication(target, rows[0] as Parameters<typeof judgePublication>[1]);
}

/** The repair, for messages: db:provision restores exactly the outbox and heartbeat tables, inserts and updates. */
export const PUBLICATION_FIX =
  'Run `outbox db:provision` with the same configuration: it restores the publication (outbox and heartbeat tables, publish = insert, update). ' +
  'Outbox rows committed while inserts were not published were never decoded: find them (by created_at) and publish them again; consumers deduplicate by id.';
