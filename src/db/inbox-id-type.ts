import type { Pool } from 'pg';
import { OutboxError } from '../errors';

/**
 * The inbox's message_id column type: `uuid` as sql/migrations/002_inbox.sql made it, `text` after
 * 013_inbox_text_ids.sql (event ids of a Debezium outbox that are bigints or text). Statements that
 * take ids as parameters leave the array untyped (`message_id = ANY($2)`) so PostgreSQL types it from
 * the column; only the INSERT of non-UUID ids needs to know, so only it asks. One query per pool and
 * table, cached.
 */
export type InboxIdType = 'uuid' | 'text';

const cache = new WeakMap<object, Map<string, Promise<InboxIdType>>>();

export function inboxIdType(pool: Pick<Pool, 'query'>, inboxTable: string): Promise<InboxIdType> {
  let byTable = cache.get(pool);
  if (!byTable) cache.set(pool, (byTable = new Map<string, Promise<InboxIdType>>()));
  let type = byTable.get(inboxTable);
  if (!type) {
    type = pool
      .query<{ type: string | null }>(
        "SELECT format_type(a.atttypid, NULL) AS type FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attname = 'message_id' AND NOT a.attisdropped",
        [inboxTable],
      )
      .then(({ rows }) => (rows[0]?.type === 'uuid' || rows[0] === undefined ? 'uuid' : 'text'));
    byTable.set(inboxTable, type);
    // A failure (the database away) is not remembered: the next call asks again.
    type.catch(() => byTable?.delete(inboxTable));
  }
  return type;
}

/** The refusal of a non-UUID id by an inbox still on uuid ids: names the migration that lifts it. */
export function uuidInboxRefuses(id: string, inboxTable: string): OutboxError {
  return new OutboxError(
    'RECORD_INVALID',
    `The event id ${JSON.stringify(id.slice(0, 100))} is not a UUID, and the inbox ${inboxTable} keys events by uuid. ` +
      'Run `outbox db:provision` to apply migration 013_inbox_text_ids (message_id becomes text; UUID ids keep working), then replay the dead letter.',
    { details: { id: id.slice(0, 100), inboxTable } },
  );
}

const keyCache = new WeakMap<object, Map<string, Promise<string | null>>>();

/**
 * The partitioned inbox's key function (migration 016: message_ms = fn(message_id), enforced by a CHECK),
 * schema-qualified and escaped, found through that CHECK's dependency; null before migration 016, when
 * the INSERT leaves message_ms out. Cached per pool and table like the id type; `forgetInboxKeyFunction`
 * drops it (the router does on a check violation of its INSERT).
 */
export function inboxKeyFunction(db: Pick<Pool, 'query'>, inboxTable: string, cacheOwner: object = db): Promise<string | null> {
  let byTable = keyCache.get(cacheOwner);
  if (!byTable) keyCache.set(cacheOwner, (byTable = new Map<string, Promise<string | null>>()));
  let fn = byTable.get(inboxTable);
  if (!fn) {
    fn = db
      .query<{ fn: string }>(
        'SELECT format($2, n.nspname, p.proname) AS fn FROM pg_constraint c ' +
          "JOIN pg_depend d ON d.classid = 'pg_constraint'::regclass AND d.objid = c.oid AND d.refclassid = 'pg_proc'::regclass " +
          'JOIN pg_proc p ON p.oid = d.refobjid JOIN pg_namespace n ON n.oid = p.pronamespace ' +
          "WHERE c.conrelid = to_regclass($1) AND c.contype = 'c' AND pg_get_constraintdef(c.oid) LIKE '%message_ms = %' LIMIT 1",
        [inboxTable, '%I.%I'],
      )
      .then(({ rows }) => rows[0]?.fn ?? null);
    byTable.set(inboxTable, fn);
    fn.catch(() => byTable?.delete(inboxTable));
  }
  return fn;
}

export function forgetInboxKeyFunction(cacheOwner: object, inboxTable: string): void {
  keyCache.get(cacheOwner)?.delete(inboxTable);
}
