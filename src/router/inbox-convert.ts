import { performance } from 'node:perf_hooks';
import { escapeIdentifier, type Client } from 'pg';
import { pgCode, qualified } from '../db';
import { OutboxError } from '../errors';
import { derivedName, inboxPartitionNames } from '../provision/sql-files';
import { addPartitionsAhead, partitionRange } from './inbox-partitions';

/**
 * Converts a one-table inbox (migration 016 applied) into the partitioned one, online
 * (docs/inbox-partitions.md, "Converting an inbox"). Every step but the last leaves inserts running;
 * each can be run again after a failure.
 *
 * The existing table BECOMES the catch-all partition [MINVALUE, 1): no row is copied or moved, so the
 * dedup of every event applied before stays where it is. That is exact because the key function only
 * returns a time for UUIDv7 ids at or after a cutover in the future: every id already in the table (and
 * every id a router inserts until the cutover, old routers included, which leave message_ms at its
 * default 0) maps to 0, the catch-all. A redelivery of any of them computes 0 again and meets its row.
 * The other way, a second table drained beside the new one, would need every router to look in both.
 *
 * 1. the key function gets its cutover (start of the interval after the next, or `cutoverMs`), and the
 *    CHECK (message_ms = fn(message_id)) of migration 016 is validated (a scan; SHARE UPDATE EXCLUSIVE,
 *    inserts continue);
 * 2. a CHECK (message_ms < 1) is validated the same way, so ATTACH need not scan under its lock;
 * 3. a unique index (consumer, message_id, message_ms) is built CONCURRENTLY, so ATTACH adopts it;
 * 4. one short transaction: rename the table to <inbox>_other (dropping its old
 *    primary key, now redundant), create the
 *    partitioned <inbox> with the same columns, attach <inbox>_other as the catch-all, add the time
 *    partitions from the cutover on, grant the router its rights on the new table.
 */
export interface ConvertOptions {
  schema: string;
  inboxTable: string;
  routerRole: string;
  intervalMs: number;
  ahead: number;
  /** When UUIDv7 ids start to go to time partitions (default: the start of the interval after the next). */
  cutoverMs?: number;
  lockTimeoutMs?: number;
  now?: () => number;
  progress?: (step: string, ms: number) => void;
}

export interface ConvertReport {
  converted: boolean;
  cutoverMs: number;
  partitions: string[];
  steps: Record<string, number>;
}

const V7 = "'^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'";

/** The key function's body with its cutover: the UUIDv7 ms of ids at or after it, 0 for every other id. */
export function messageMsBody(cutoverMs: number): string {
  const ms = "('x' || substr(p_id, 1, 8) || substr(p_id, 10, 4))::bit(48)::bigint";
  return `SELECT CASE WHEN p_id ~ ${V7} AND ${ms} >= ${Math.trunc(cutoverMs)} THEN ${ms} ELSE 0 END`;
}

export async function convertInbox(client: Client, options: ConvertOptions): Promise<ConvertReport> {
  const now = options.now ?? Date.now;
  const names = inboxPartitionNames(options);
  const inbox = qualified(options.schema, options.inboxTable);
  const steps: Record<string, number> = {};
  // Every step waits at most lockTimeoutMs for a lock (the brief ACCESS EXCLUSIVE of ADD CONSTRAINT, the
  // old transactions CREATE INDEX CONCURRENTLY waits out), so inserts never queue long behind it; a step
  // that timed out is tried again, up to five times.
  await client.query(`SET lock_timeout = ${Math.trunc(options.lockTimeoutMs ?? 2_000)}`);
  const step = async <T>(name: string, work: () => Promise<T>): Promise<T> => {
    const t = performance.now();
    const out = await retryLockTimeout(work);
    steps[name] = Math.round(performance.now() - t);
    options.progress?.(name, steps[name] as number);
    return out;
  };
  const { rows: shape } = await client.query<{ kind: string; body: string | null }>(
    'SELECT c.relkind::text AS kind, (SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure($2)) AS body FROM pg_class c WHERE c.oid = to_regclass($1)',
    [inbox, `${names.messageMs}(text)`],
  );
  if (!shape[0] || shape[0].body === null) {
    throw new OutboxError('INBOX_NOT_PARTITIONED', `${inbox} has no key function ${names.messageMs}: run \`outbox db:provision\` to apply migration 016_inbox_partitions first.`);
  }
  const existing = />= (\d+) THEN/.exec(shape[0].body)?.[1];
  const cutoverMs = existing !== undefined ? Number(existing) : (options.cutoverMs ?? partitionRange(now() + options.intervalMs, options.intervalMs).toMs);
  if (shape[0].kind === 'p') return { converted: false, cutoverMs, partitions: [], steps };
  if (existing === undefined && cutoverMs <= now()) {
    throw new OutboxError('CONFIG_INVALID', `The cutover ${new Date(cutoverMs).toISOString()} is not in the future: every id already in ${inbox} must map to the catch-all. Pass a later --cutover-ms, or none.`);
  }
  if (existing === undefined) {
    await step('key-function', () => client.query(`CREATE OR REPLACE FUNCTION ${names.messageMs}(p_id text) RETURNS bigint LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$ ${messageMsBody(cutoverMs)} $fn$`));
  }
  await step('validate-key', () => client.query(`ALTER TABLE ${inbox} VALIDATE CONSTRAINT ${names.keyCheck}`));
  const bound = escapeIdentifier(derivedName(names.catchAllName, '_bound'));
  await step('validate-bound', async () => {
    await client.query(`ALTER TABLE ${inbox} DROP CONSTRAINT IF EXISTS ${bound}`);
    await client.query(`ALTER TABLE ${inbox} ADD CONSTRAINT ${bound} CHECK (message_ms < 1) NOT VALID`);
    await client.query(`ALTER TABLE ${inbox} VALIDATE CONSTRAINT ${bound}`);
  });
  const keyIndexName = derivedName(names.catchAllName, '_key_idx');
  await step('key-index', async () => {
    await client.query(`DROP INDEX CONCURRENTLY IF EXISTS ${qualified(options.schema, keyIndexName)}`);
    await client.query(`CREATE UNIQUE INDEX CONCURRENTLY ${escapeIdentifier(keyIndexName)} ON ${inbox} (consumer, message_id, message_ms)`);
  });
  const partitions = await step('swap', () => swap(client, options, names, cutoverMs, now));
  return { converted: true, cutoverMs, partitions, steps };
}

async function retryLockTimeout<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (pgCode(error) !== '55P03' || attempt >= 5) throw error;
    }
  }
}

async function swap(client: Client, options: ConvertOptions, names: ReturnType<typeof inboxPartitionNames>, cutoverMs: number, now: () => number): Promise<string[]> {
  const inbox = qualified(options.schema, options.inboxTable);
  const processedIndex = derivedName(options.inboxTable, '_processed_idx');
  await client.query('BEGIN');
  try {
    await client.query(`LOCK TABLE ${inbox} IN ACCESS EXCLUSIVE MODE`);
    await client.query(`ALTER TABLE ${inbox} RENAME TO ${escapeIdentifier(names.catchAllName)}`);
    await client.query(`ALTER INDEX IF EXISTS ${qualified(options.schema, processedIndex)} RENAME TO ${escapeIdentifier(derivedName(options.inboxTable, '_other_processed_idx'))}`);
    await client.query(
      `CREATE TABLE ${inbox} (consumer text NOT NULL, message_id text NOT NULL, processed_at timestamptz NOT NULL DEFAULT now(), message_ms bigint NOT NULL DEFAULT 0, ` +
        `CONSTRAINT ${names.keyCheck} CHECK (message_ms = ${names.messageMs}(message_id)), ` +
        `CONSTRAINT ${escapeIdentifier(derivedName(options.inboxTable, '_key'))} PRIMARY KEY (consumer, message_id, message_ms)) PARTITION BY RANGE (message_ms)`,
    );
    await client.query(`CREATE INDEX ${escapeIdentifier(processedIndex)} ON ${inbox} (consumer, processed_at)`);
    // The old primary key (consumer, message_id) goes: the unique index of step 3 takes its place as the
    // partition's share of the new one (exact as well, since message_ms follows from message_id).
    await client.query(`ALTER TABLE ${names.catchAll} DROP CONSTRAINT IF EXISTS ${escapeIdentifier(derivedName(options.inboxTable, '_pkey'))}`);
    await client.query(`ALTER TABLE ${inbox} ATTACH PARTITION ${names.catchAll} FOR VALUES FROM (MINVALUE) TO (1)`);
    const partitions = await addPartitionsAhead(client, names, Math.max(now(), cutoverMs), options.intervalMs, options.ahead);
    await client.query(`GRANT SELECT, INSERT, DELETE ON ${inbox} TO ${escapeIdentifier(options.routerRole)}`);
    await client.query('COMMIT');
    return partitions;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}
