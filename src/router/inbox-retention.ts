import { performance } from 'node:perf_hooks';
import { ConfigResourceTypes, type Admin } from 'kafkajs';
import type { Pool } from 'pg';
import { OutboxError } from '../errors';
import { formatDuration } from '../status/format';
import { runCleanup } from '../db';

/**
 * The inbox's lifecycle (docs/operations.md, "Inbox retention"). An inbox row is what turns a
 * redelivery into a duplicate; once it is gone, the event would be applied again. So a row may go only
 * when its event can no longer come back:
 * - from a routed topic: Kafka deletes a record once its whole segment is older than retention.ms, and
 *   a segment is closed after segment.ms at the latest, so a record lives at most retention.ms + segment.ms;
 * - from the DLQ through `dlq:replay --all`: within the operator's replay horizon (dlqReplayHorizonMs);
 * - as a parked event: a key parked after one of its events was applied dead-letters that event again
 *   when it is redelivered (KEY_PARKED, without an inbox check), and its replay is a duplicate only
 *   while its inbox row exists. Such rows (a parked event_id of the consumer) are kept, whatever their
 *   age, until the event leaves the parked table (replayed or released).
 * A parked event that was never applied has no inbox row; the window alone covers the rest.
 */

/** One routed topic's deletion settings; null: unknown (not readable). -1 retention: never deleted. */
export interface TopicRetention {
  topic: string;
  retentionMs: number | null;
  segmentMs: number | null;
}

export interface RetentionCheck {
  /** The safe minimum of inboxRetentionMs; Infinity when a topic keeps its records forever. */
  minimumMs: number;
  /** The topic that sets it. */
  topic?: string;
  /** Topics whose settings could not be read (left out of the minimum). */
  unknown: string[];
}

/** The safe minimum over these topics: max(retention.ms + segment.ms) + the DLQ replay horizon. */
export function safeInboxRetention(topics: readonly TopicRetention[], horizonMs: number): RetentionCheck {
  let worst: { topic: string; lives: number } | undefined;
  const unknown: string[] = [];
  for (const t of topics) {
    if (t.retentionMs === null) {
      unknown.push(t.topic);
      continue;
    }
    const lives = t.retentionMs < 0 ? Infinity : t.retentionMs + Math.max(0, t.segmentMs ?? 0);
    if (!worst || lives > worst.lives) worst = { topic: t.topic, lives };
  }
  return { minimumMs: (worst?.lives ?? 0) + horizonMs, topic: worst?.topic, unknown };
}

/** retention.ms and segment.ms of each topic, in one DescribeConfigs request (broker defaults where the topic sets none). */
export async function topicRetentions(admin: Admin, topics: readonly string[]): Promise<TopicRetention[]> {
  if (topics.length === 0) return [];
  const { resources } = await admin.describeConfigs({
    includeSynonyms: false,
    resources: topics.map((name) => ({ type: ConfigResourceTypes.TOPIC, name, configNames: ['retention.ms', 'segment.ms'] })),
  });
  const number = (entries: Array<{ configName: string; configValue: string | null }>, name: string) => {
    const value = entries.find((e) => e.configName === name)?.configValue;
    return value !== undefined && value !== null && /^-?\d+$/.test(value) ? Number(value) : null;
  };
  const byName = new Map(resources.map((r) => [r.resourceName, r]));
  return topics.map((topic) => {
    const r = byName.get(topic);
    const ok = r !== undefined && r.errorCode === 0;
    return { topic, retentionMs: ok ? number(r.configEntries, 'retention.ms') : null, segmentMs: ok ? number(r.configEntries, 'segment.ms') : null };
  });
}

/**
 * The check the router makes at start and `inbox:prune` makes before pruning: reads the topics'
 * retention (a refused DescribeConfigs leaves them all out: `unknown`, for the caller to warn about) and
 * refuses a window below the safe minimum. 0 (never prune) reads nothing.
 */
export async function checkInboxRetention(
  admin: Admin,
  topics: readonly string[],
  settings: { inboxRetentionMs: number; dlqReplayHorizonMs: number; allowShortInboxRetention: boolean },
): Promise<RetentionCheck | undefined> {
  if (settings.inboxRetentionMs === 0) return undefined;
  const retentions = await topicRetentions(admin, topics).catch(() => topics.map((topic) => ({ topic, retentionMs: null, segmentMs: null })));
  return assertInboxRetention(settings.inboxRetentionMs, settings.dlqReplayHorizonMs, retentions, settings.allowShortInboxRetention);
}

/**
 * Refuses a retention window below the safe minimum (INBOX_RETENTION_TOO_SHORT) unless `allowShort`;
 * returns the check so the caller can log it. 0 (never prune) passes.
 */
export function assertInboxRetention(retentionMs: number, horizonMs: number, topics: readonly TopicRetention[], allowShort: boolean): RetentionCheck {
  const check = safeInboxRetention(topics, horizonMs);
  if (retentionMs === 0 || allowShort || retentionMs >= check.minimumMs) return check;
  const minimum = Number.isFinite(check.minimumMs) ? `${formatDuration(check.minimumMs)} (${check.minimumMs} ms)` : 'forever';
  const source = topics.find((t) => t.topic === check.topic);
  const why = !Number.isFinite(check.minimumMs)
    ? `${check.topic} keeps its records forever (retention.ms=-1), so any of them can be redelivered (a group reset, an expired offset)`
    : `${check.topic} keeps a record up to retention.ms ${source?.retentionMs} + segment.ms ${source?.segmentMs ?? 0}, and dlqReplayHorizonMs is ${horizonMs}`;
  throw new OutboxError(
    'INBOX_RETENTION_TOO_SHORT',
    `inboxRetentionMs ${retentionMs} (${formatDuration(retentionMs)}) is below the safe minimum, ${minimum}: ${why}; an event redelivered after its inbox row was pruned is applied twice. ` +
      `Raise router.inboxRetentionMs (--inbox-retention-ms) to at least that, set it to 0 to never prune, or pass allowShortInboxRetention (--allow-short-inbox-retention) if the topics' settings do not tell the truth.`,
    { details: { retentionMs, minimumMs: Number.isFinite(check.minimumMs) ? check.minimumMs : -1, topic: check.topic, horizonMs } },
  );
}

/**
 * One prune statement: at most $3 of the consumer's rows older than $2 ms, the oldest first (index of
 * migration 010), none whose event is parked for the consumer (see above). Deleted by primary key. No
 * FOR UPDATE SKIP LOCKED: it needs UPDATE on the inbox, which the router role does not have; two
 * replicas pruning at once wait at most one statement on each other's rows, then skip the ones gone.
 */
export const pruneInboxSql = (inbox: string, parked: string): string =>
  `DELETE FROM ${inbox} WHERE consumer = $1 AND message_id IN (` +
  `SELECT i.message_id FROM ${inbox} i WHERE i.consumer = $1 AND i.processed_at < now() - $2::float8 * interval '1 millisecond' ` +
  `AND NOT EXISTS (SELECT 1 FROM ${parked} p WHERE p.consumer = $1 AND lower(p.event_id) = i.message_id::text) ` +
  'ORDER BY i.processed_at LIMIT $3)';

export interface PruneOptions {
  inboxTable: string;
  parkedTable: string;
  consumer: string;
  retentionMs: number;
  batchSize: number;
  /** DELETE statements per run at most (default 1,000). */
  maxBatches?: number;
  signal?: AbortSignal;
}

export interface PruneResult {
  deleted: number;
  batches: number;
  ms: number;
}

/** Deletes the consumer's inbox rows past retention, one short statement (its own transaction) per batch. */
export async function pruneInbox(pool: Pool, options: PruneOptions): Promise<PruneResult> {
  const started = performance.now();
  const text = pruneInboxSql(options.inboxTable, options.parkedTable);
  const result = await runCleanup(async (limit) => (await pool.query(text, [options.consumer, options.retentionMs, limit])).rowCount ?? 0, {
    batchSize: options.batchSize,
    maxBatches: options.maxBatches,
    signal: options.signal,
  });
  return { ...result, ms: performance.now() - started };
}

/** The inbox's row count as the planner knows it (pg_class.reltuples: no scan); 0 before its first ANALYZE. */
export async function inboxRowsEstimate(pool: Pool, inboxTable: string): Promise<number> {
  const { rows } = await pool.query<{ n: string | null }>('SELECT reltuples::bigint::text AS n FROM pg_class WHERE oid = to_regclass($1)', [inboxTable]);
  return Math.max(0, Number(rows[0]?.n ?? 0));
}
