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
 * A compacted topic, one that keeps records forever, or one whose settings cannot be read has no finite
 * window: pruning stops (the router keeps consuming; prune-guard.ts) and `inbox:prune` refuses.
 */

/** One routed topic's deletion settings; null retention: unknown (not readable). -1 retention: never deleted. */
export interface TopicRetention {
  topic: string;
  retentionMs: number | null;
  segmentMs: number | null;
  /**
   * cleanup.policy includes `compact`: a record may stay as long as its key's latest (and the cleaner
   * merges segments, so even `compact,delete` keeps one past retention.ms + segment.ms): forever.
   */
  compacted?: boolean;
}

export interface RetentionCheck {
  /** The safe minimum of inboxRetentionMs; Infinity when a topic keeps its records forever (or compacts them). */
  minimumMs: number;
  /** The topic that sets it. */
  topic?: string;
  /** Topics whose settings could not be read (left out of the minimum; pruning is unsafe while there are any). */
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
    const lives = t.compacted || t.retentionMs < 0 ? Infinity : t.retentionMs + Math.max(0, t.segmentMs ?? 0);
    if (!worst || lives > worst.lives) worst = { topic: t.topic, lives };
  }
  return { minimumMs: (worst?.lives ?? 0) + horizonMs, topic: worst?.topic, unknown };
}

/**
 * retention.ms, segment.ms and cleanup.policy of each topic, in one DescribeConfigs request (broker
 * defaults where the topic sets none). Never throws: a refused or failed request leaves every topic
 * unknown (`retentionMs: null`), a topic the broker could not describe that one; `error` says why.
 */
export async function topicRetentions(admin: Admin, topics: readonly string[]): Promise<{ retentions: TopicRetention[]; error?: string }> {
  if (topics.length === 0) return { retentions: [] };
  const unknown = (topic: string) => ({ topic, retentionMs: null, segmentMs: null });
  let resources: Awaited<ReturnType<Admin['describeConfigs']>>['resources'];
  try {
    ({ resources } = await admin.describeConfigs({
      includeSynonyms: false,
      resources: topics.map((name) => ({ type: ConfigResourceTypes.TOPIC, name, configNames: ['retention.ms', 'segment.ms', 'cleanup.policy'] })),
    }));
  } catch (error) {
    return { retentions: topics.map(unknown), error: (error as Error).message };
  }
  const value = (entries: Array<{ configName: string; configValue: string | null }>, name: string) => entries.find((e) => e.configName === name)?.configValue ?? null;
  const number = (v: string | null) => (v !== null && /^-?\d+$/.test(v) ? Number(v) : null);
  const byName = new Map(resources.map((r) => [r.resourceName, r]));
  const retentions = topics.map((topic): TopicRetention => {
    const r = byName.get(topic);
    if (r === undefined || r.errorCode !== 0) return unknown(topic);
    const policy = value(r.configEntries, 'cleanup.policy');
    // An unreadable policy is as unknown as an unreadable retention.
    if (policy === null) return unknown(topic);
    return { topic, retentionMs: number(value(r.configEntries, 'retention.ms')), segmentMs: number(value(r.configEntries, 'segment.ms')), compacted: policy.split(',').map((p) => p.trim()).includes('compact') };
  });
  const failed = resources.find((r) => r.errorCode !== 0);
  return { retentions, error: failed ? `${failed.resourceName}: ${failed.errorMessage ?? `error code ${failed.errorCode}`}` : undefined };
}

/** Why pruning is not safe: a metric label each (outbox_router_inbox_prune_blocked). */
export const PRUNE_BLOCK_REASONS = ['retention-too-short', 'retention-infinite', 'compacted', 'retention-unknown'] as const;
export type PruneBlockReason = (typeof PRUNE_BLOCK_REASONS)[number];

/** Pruning is not safe: why, the topics that say so, and the whole story (an INBOX_RETENTION_TOO_SHORT message). */
export interface PruneBlock {
  reasons: PruneBlockReason[];
  topics: string[];
  message: string;
  /** The safe minimum over the topics that could be read (-1: forever). */
  minimumMs: number;
}

/**
 * Whether a window of `retentionMs` is safe against these topics: undefined when it is (or 0: never
 * prune; or `allowShort`), else the block. A topic whose settings are unknown, that is compacted or
 * keeps records forever has no finite safe window; one with finite settings needs retentionMs at least
 * its retention.ms + segment.ms + horizonMs.
 */
export function pruneBlock(retentionMs: number, horizonMs: number, topics: readonly TopicRetention[], allowShort: boolean, readError?: string): PruneBlock | undefined {
  const check = safeInboxRetention(topics, horizonMs);
  if (retentionMs === 0 || allowShort || (retentionMs >= check.minimumMs && check.unknown.length === 0)) return undefined;
  const whys: string[] = [];
  const reasons: PruneBlockReason[] = [];
  const named: string[] = [];
  const compacted = topics.filter((t) => t.compacted && t.retentionMs !== null).map((t) => t.topic);
  const forever = topics.filter((t) => !t.compacted && t.retentionMs !== null && t.retentionMs < 0).map((t) => t.topic);
  if (check.unknown.length > 0) {
    reasons.push('retention-unknown');
    named.push(...check.unknown);
    whys.push(
      `the settings of ${list(check.unknown)} could not be read${readError ? ` (${readError})` : ''}, so how long they keep a record is unknown; grant DescribeConfigs on the routed topics`,
    );
  }
  if (compacted.length > 0) {
    reasons.push('compacted');
    named.push(...compacted);
    whys.push(`${list(compacted)} ${compacted.length === 1 ? 'is' : 'are'} compacted (cleanup.policy compact): a record stays as long as its key's latest, so any of them can be redelivered`);
  }
  if (forever.length > 0) {
    reasons.push('retention-infinite');
    named.push(...forever);
    whys.push(`${list(forever)} ${forever.length === 1 ? 'keeps' : 'keep'} its records forever (retention.ms=-1), so any of them can be redelivered (a group reset, an expired offset)`);
  }
  if (Number.isFinite(check.minimumMs) && retentionMs < check.minimumMs) {
    const source = topics.find((t) => t.topic === check.topic);
    reasons.push('retention-too-short');
    if (check.topic) named.push(check.topic);
    whys.push(
      check.topic ? `${check.topic} keeps a record up to retention.ms ${source?.retentionMs} + segment.ms ${source?.segmentMs ?? 0}, and dlqReplayHorizonMs is ${horizonMs}` : `dlqReplayHorizonMs is ${horizonMs}`,
    );
  }
  const minimum = Number.isFinite(check.minimumMs) ? `${formatDuration(check.minimumMs)} (${check.minimumMs} ms)` : 'forever';
  const message =
    `inboxRetentionMs ${retentionMs} (${formatDuration(retentionMs)}) is below the safe minimum, ${minimum}: ${whys.join('; ')}; an event redelivered after its inbox row was pruned is applied twice. ` +
    `Raise router.inboxRetentionMs (--inbox-retention-ms) to at least that, set it to 0 to never prune, or pass allowShortInboxRetention (--allow-short-inbox-retention) if the topics' settings do not tell the truth.`;
  return { reasons, topics: [...new Set(named)].sort(), message, minimumMs: Number.isFinite(check.minimumMs) ? check.minimumMs : -1 };
}

const list = (topics: readonly string[]) => (topics.length > 3 ? `${topics.slice(0, 3).join(', ')} and ${topics.length - 3} more` : topics.join(', '));

/** Refuses (INBOX_RETENTION_TOO_SHORT) where pruneBlock blocks; returns the check so the caller can log it. 0 (never prune) passes. */
export function assertInboxRetention(retentionMs: number, horizonMs: number, topics: readonly TopicRetention[], allowShort: boolean, readError?: string): RetentionCheck {
  const block = pruneBlock(retentionMs, horizonMs, topics, allowShort, readError);
  if (block) {
    const check = safeInboxRetention(topics, horizonMs);
    throw new OutboxError('INBOX_RETENTION_TOO_SHORT', block.message, { details: { retentionMs, minimumMs: block.minimumMs, topic: check.topic, topics: block.topics, reasons: block.reasons, horizonMs } });
  }
  return safeInboxRetention(topics, horizonMs);
}

export interface PruneSettings {
  inboxRetentionMs: number;
  dlqReplayHorizonMs: number;
  allowShortInboxRetention: boolean;
}

/**
 * `inbox:prune`'s check before pruning: reads the topics' settings and refuses (INBOX_RETENTION_TOO_SHORT)
 * wherever the router would stop pruning (prune-guard.ts). 0 (never prune) reads nothing.
 */
export async function checkInboxRetention(admin: Admin, topics: readonly string[], settings: PruneSettings): Promise<RetentionCheck | undefined> {
  if (settings.inboxRetentionMs === 0) return undefined;
  const { retentions, error } = await topicRetentions(admin, topics);
  return assertInboxRetention(settings.inboxRetentionMs, settings.dlqReplayHorizonMs, retentions, settings.allowShortInboxRetention, error);
}

/**
 * One prune statement: at most $3 of the consumer's rows older than $2 ms, the oldest first (index of
 * migration 010), none whose event is parked for the consumer (see above). Deleted by primary key. No
 * FOR UPDATE SKIP LOCKED: it needs UPDATE on the inbox, which the router role does not have; two
 * replicas pruning at once wait at most one statement on each other's rows, then skip the ones gone.
 */
export const pruneInboxSql = (inbox: string, parked: string, partitioned = false): string =>
  // Partitioned (migration 016): only rows with message_ms below $4 (inbox-partitions.ts deleteBoundMs),
  // matched on the whole key, so PostgreSQL reads only the catch-all and the partitions kept past the window.
  (partitioned
    ? `DELETE FROM ${inbox} WHERE consumer = $1 AND message_ms < $4 AND (message_id, message_ms) IN (SELECT i.message_id, i.message_ms `
    : `DELETE FROM ${inbox} WHERE consumer = $1 AND message_id IN (SELECT i.message_id `) +
  `FROM ${inbox} i WHERE i.consumer = $1 AND i.processed_at < now() - $2::float8 * interval '1 millisecond' ${partitioned ? 'AND i.message_ms < $4 ' : ''}` +
  // Two anti-joins, not one with `IN (p.event_id, lower(p.event_id))`: each is an equality PostgreSQL can
  // hash, where the OR is a nested loop over every parked event per inbox row (7.3 s against 17 ms for
  // 2,000 rows beside 10,000 parked events; it hit the statement timeout in CI).
  `AND NOT EXISTS (SELECT 1 FROM ${parked} p WHERE p.consumer = $1 AND p.event_id = i.message_id::text) ` +
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
  /** Checked before each statement: true stops the run (the router's retention check failed meanwhile). */
  blocked?: () => boolean;
  /** A partitioned inbox: delete only rows with message_ms below this (inbox-partitions.ts deleteBoundMs). */
  keyBelowMs?: number;
}

export interface PruneResult {
  deleted: number;
  batches: number;
  ms: number;
}

/** Deletes the consumer's inbox rows past retention, one short statement (its own transaction) per batch. */
export async function pruneInbox(pool: Pool, options: PruneOptions): Promise<PruneResult> {
  const started = performance.now();
  const partitioned = options.keyBelowMs !== undefined;
  const text = pruneInboxSql(options.inboxTable, options.parkedTable, partitioned);
  const values = (limit: number) => [options.consumer, options.retentionMs, limit, ...(partitioned ? [options.keyBelowMs] : [])];
  const result = await runCleanup(async (limit) => (options.blocked?.() ? 0 : ((await pool.query(text, values(limit))).rowCount ?? 0)), {
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
