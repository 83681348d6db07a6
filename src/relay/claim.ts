import { performance } from 'node:perf_hooks';
import type { Pool } from 'pg';
import type { KeyBlocks } from './key-blocks';
import { publishBatch, type PublishOutcome, type Sender } from './publish';
import { recordBytes, recordFor, type OutboxRow, type RelayRecord } from './records';
import { messageOf, query, type RelayRuntime } from './runtime';

export interface ClaimResult {
  claimed: number;
  /** The batch was full (by rows or bytes): more may be waiting. */
  full: boolean;
  /** Every publish failed (the broker is likely down). */
  allFailed: boolean;
}

const EMPTY: ClaimResult = { claimed: 0, full: false, allFailed: false };

/**
 * One claim transaction of one shard: take the shard's advisory xact lock, claim its oldest unpublished
 * rows, publish them (acks=all), mark what was published, commit. `idle`: probe first (a cheap read)
 * and claim only if the shard has rows.
 */
export async function claimBatch(rt: RelayRuntime, sender: Sender, shard: number, keyBlocks: KeyBlocks, idle: boolean): Promise<ClaimResult> {
  const { sql, settings } = rt;
  const pool = rt.pool as Pool;
  if (idle) {
    const { rowCount } = await query(rt, pool, sql.probe, [shard, settings.workers, keyBlocks.active()]);
    if (!rowCount) {
      rt.stats.emptyClaims++;
      rt.events.emit('relay.batch', { shard, claimed: 0, queries: 1 });
      return EMPTY;
    }
  }
  const client = await pool.connect();
  let queries = 0;
  const q = <R extends object>(text: string, values?: unknown[]) => {
    queries++;
    return query<R>(rt, client, text, values);
  };
  let broken: Error | undefined;
  try {
    await q('BEGIN');
    const claimStart = performance.now();
    const { rows } = await q<OutboxRow>(sql.claim, [rt.ns.shards, shard, settings.workers, settings.batchSize, keyBlocks.active(), settings.maxBatchBytes]);
    const claimMs = performance.now() - claimStart;
    if (rows.length === 0) {
      await q('COMMIT');
      rt.stats.emptyClaims++;
      rt.events.emit('relay.batch', { shard, claimed: 0, claimMs, queries });
      return EMPTY;
    }
    const records = rows.map((row) => recordFor(row, rt.topicFor));
    // The claim counted the same bytes (ROW_BYTES_EXPRESSION): at most maxBatchBytes plus one row.
    const bytes = records.reduce((n, r) => n + recordBytes(r), 0);
    const outcome = await publishBatch(records, sender);
    await q(sql.mark, [outcome.published.map((r) => r.rowId), records.map((r) => r.rowId)]);
    await q('COMMIT');
    report(rt, shard, keyBlocks, records, outcome, { bytes, claimMs, queries });
    return { claimed: rows.length, full: rows.length >= settings.batchSize || bytes >= settings.maxBatchBytes, allFailed: outcome.published.length === 0 };
  } catch (error) {
    broken = error as Error;
    rt.stats.queries++;
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    // A client that failed mid-transaction is dropped, not reused.
    client.release(broken);
  }
}

/** Blocks the keys whose publish failed, counts and emits the batch. */
function report(rt: RelayRuntime, shard: number, keyBlocks: KeyBlocks, records: RelayRecord[], outcome: PublishOutcome, measured: { bytes: number; claimMs: number; queries: number }): void {
  const publishedByTopic: Record<string, number> = {};
  for (const r of outcome.published) publishedByTopic[r.topic] = (publishedByTopic[r.topic] ?? 0) + 1;
  const failedByTopic: Record<string, number> = {};
  for (const { group, error } of outcome.failed) {
    failedByTopic[group.topic] = (failedByTopic[group.topic] ?? 0) + group.records.length;
    const head = group.records[0] as RelayRecord;
    const retryInMs = keyBlocks.block(head.aggregateId, head.attempts + 1);
    rt.events.emit('relay.publish-failed', { shard, code: 'RELAY_PUBLISH_FAILED', topic: group.topic, aggregateId: group.key, rows: group.records.length, attempts: head.attempts + 1, retryInMs, error: messageOf(error) });
  }
  const failed = records.length - outcome.published.length;
  rt.stats.batches++;
  rt.stats.published += outcome.published.length;
  rt.stats.failed += failed;
  rt.stats.blockedKeys = rt.blocks.reduce((n, b) => n + b.size(), 0);
  rt.publishHealth.batch(outcome.published.length, failed);
  rt.events.emit('relay.batch', {
    shard,
    claimed: records.length,
    bytes: measured.bytes,
    published: outcome.published.length,
    failed,
    claimMs: measured.claimMs,
    queries: measured.queries,
    publishedByTopic,
    failedByTopic,
    blockedKeys: rt.stats.blockedKeys,
  });
}
