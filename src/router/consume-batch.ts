import type { Consumer, EachBatchPayload } from 'kafkajs';
import { qualified } from '../db';
import { isOutboxError } from '../errors';
import { parkedTableName } from '../provision/sql-files';
import { retryUntil } from '../service';
import { classifyDatabaseFailure, refusalFields } from './credential-watch';
import { ParkedKeys } from './parked';
import { linkedAbort, runPartitionBatch } from './partition-batch';
import type { BatchScope, RouterDeps } from './record-context';
import type { RouterRuntime } from './runtime';

/** kafkajs's heartbeat errors that mean the group is rebalancing or has moved on without this member. */
const REBALANCE_ERRORS = new Set(['REBALANCE_IN_PROGRESS', 'ILLEGAL_GENERATION', 'UNKNOWN_MEMBER_ID', 'FENCED_INSTANCE_ID']);

/** A batch starts no new record after this long while it is the last one of its fetch (see runPartitionBatch's yieldAfterMs). */
const YIELD_AFTER_MS = 500;

/**
 * kafkajs's eachBatch for `owner`. kafkajs heartbeats only between batches (no background heartbeat): a
 * chunk of slow handlers would outlive the session timeout and the partition would move while it is
 * still being applied. So a timer heartbeats during the batch (kafkajs throttles it to
 * heartbeatInterval); when the group rebalances, the batch is revoked: no new transaction starts and no
 * offset is resolved.
 */
export async function eachBatch(rt: RouterRuntime, payload: EachBatchPayload, owner: Consumer): Promise<void> {
  const { batch, heartbeat } = payload;
  const commit = (all: boolean) => (all ? payload.commitOffsetsIfNecessary(payload.uncommittedOffsets()) : payload.commitOffsetsIfNecessary());
  if (rt.consumer === owner) rt.committer = commit;
  const revocation = new AbortController();
  /** Cuts the batch's waits short when the router stops or the partition is revoked. */
  const waits = linkedAbort(rt.signal());
  const revoke = (error: Error) => {
    if (revocation.signal.aborted) return;
    revocation.abort();
    waits.abort();
    if (rt.consumer === owner) rt.rebalancing = true;
    rt.events.emit('router.revoked', { topic: batch.topic, partition: batch.partition, error: error.message });
  };
  const beat = async () => {
    try {
      await heartbeat();
    } catch (error) {
      if (REBALANCE_ERRORS.has((error as { type?: string }).type ?? '')) revoke(error as Error);
      throw error;
    }
  };
  rt.batchesInHand++;
  const timer = setInterval(() => {
    // A consumer being disconnected (stop, or a re-subscribe) waits for this batch: cut a blocked or
    // waiting record short so the disconnect cannot hang on it.
    if (!payload.isRunning() || payload.isStale()) waits.abort();
    void beat().catch(() => {});
  }, rt.heartbeatIntervalMs);
  try {
    await consumeBatch(rt, payload, beat, revocation.signal, waits.signal);
  } finally {
    rt.batchesInHand--;
    clearInterval(timer);
    waits.dispose();
    // The partition goes (a rebalance) or the consumer stops: what this batch finished is committed
    // now, so the next owner does not redeliver it (it would only count duplicates).
    if (revocation.signal.aborted || payload.isStale() || !payload.isRunning() || rt.signal().aborted) {
      await commit(true).catch((e: Error) => rt.logger.debug({ event: 'router.commit-failed', error: e.message }, 'router: offset commit failed; the next owner redelivers (duplicates)'));
    }
  }
}

async function consumeBatch(rt: RouterRuntime, payload: EachBatchPayload, heartbeat: () => Promise<void>, revoked: AbortSignal, waits: AbortSignal): Promise<void> {
  const { batch, resolveOffset, commitOffsetsIfNecessary, isRunning, isStale } = payload;
  const { settings } = rt;
  const deps = rt.deps as RouterDeps;
  const scope: BatchScope = { heartbeat, signal: waits };
  const stopped = () => !isRunning() || isStale() || rt.signal().aborted || revoked.aborted;
  if (settings.parkKeys) {
    const parked = await loadParkedKeys(rt, payload, waits, stopped);
    if (!parked.done) return;
    scope.parked = parked.value;
  }
  const last = await runPartitionBatch(batch.topic, batch.partition, batch.messages, deps, scope, {
    lanes: settings.lanes,
    maxTransactionRecords: settings.maxTransactionRecords,
    resolveOffset,
    // Neither is a round trip unless due: the commit every COMMIT_INTERVAL_MS, the heartbeat every heartbeatInterval.
    progress: async () => {
      await commitOffsetsIfNecessary();
      await heartbeat();
    },
    stopped,
    revoked: () => revoked.aborted || isStale(),
    yieldAfterMs: YIELD_AFTER_MS,
    othersWaiting: () => rt.batchesInHand <= 1,
  });
  // Records behind the high watermark once this batch is done (the consumer-lag gauge).
  const position = last ?? (batch.messages.length > 0 ? String(BigInt((batch.messages[0] as { offset: string }).offset) - 1n) : undefined);
  if (position !== undefined) {
    rt.events.emit('router.lag', { topic: batch.topic, partition: batch.partition, lag: Math.max(0, Number(BigInt(batch.highWatermark) - BigInt(position) - 1n)) });
  }
}

/** The batch's parked keys (none read while the hints know there are none), retried (the database may be away) until loaded or the batch is given up. */
function loadParkedKeys(rt: RouterRuntime, { batch }: EachBatchPayload, waits: AbortSignal, stopped: () => boolean) {
  const deps = rt.deps as RouterDeps;
  const table = qualified(rt.options.config.outbox.schema, parkedTableName(rt.options.config.outbox.inboxTable));
  const keys = batch.messages.map((m) => (m.key ? m.key.toString('utf8') : ''));
  return retryUntil(() => ParkedKeys.load(deps.pool, table, rt.settings.consumer, rt.aggregateTypeOf(batch.topic), keys, rt.parkedHints), {
    signal: waits,
    backoff: rt.settings.infrastructureBackoff,
    random: rt.options.random,
    stopped,
    onRetry: (error, _attempt, delayMs) => {
      rt.stats.infrastructureRetries++;
      // A refused password or certificate names its hop and principal (credential-watch.ts, for /readyz).
      const failure = classifyDatabaseFailure(error, deps.pool);
      const code = isOutboxError(failure) ? failure.code : undefined;
      rt.events.emit('router.wait', { topic: batch.topic, partition: batch.partition, code, ...refusalFields(failure), error: (failure as Error).message, delayMs });
    },
  });
}
