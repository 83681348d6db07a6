import type { KafkaMessage } from 'kafkajs';
import { applyChunk, chunkable, finishRecord } from './apply';
import { blocksLane, prepareRecord } from './prepare';
import type { BatchScope, Outcome, Ready, RouterDeps } from './record-context';

export interface BatchOptions {
  /** Lanes per partition: records are spread by key hash, each lane keeps its keys in offset order. */
  lanes: number;
  /** Most records in one inbox transaction (1: a transaction per record). */
  maxTransactionRecords: number;
  /** Called with each offset once it and every earlier offset of the batch are finished. */
  resolveOffset(offset: string): void;
  /** Lets kafkajs commit and heartbeat between transactions. */
  progress(): Promise<void>;
  /** The router is stopping or the partition is no longer ours: start no new record. */
  stopped(): boolean;
  /** The partition was taken away (a rebalance): its offsets belong to another member now, resolve none. */
  revoked(): boolean;
  /**
   * After this long, the batch starts no new record while `othersWaiting()`: kafkajs fetches again only
   * when every batch of its last fetch is done, so a long batch would hold the other partitions' next
   * records. What is left is not resolved, so kafkajs fetches it again from the first unresolved offset.
   */
  yieldAfterMs?: number;
  othersWaiting?(): boolean;
}

/**
 * One partition's batch. With one lane the records run in offset order; with more, records are spread
 * over lanes by a hash of the key, so a key always lands in the same lane and keeps its order, while
 * different keys run side by side. Each lane groups consecutive ready records into one inbox
 * transaction. Offsets are resolved only as a contiguous prefix: a record finished in a fast lane is
 * not committed past an unfinished one in a slow lane, so a crash redelivers (and the inbox skips)
 * rather than loses. Returns the last resolved offset, or undefined when none was.
 */
export async function runPartitionBatch(
  topic: string,
  partition: number,
  messages: readonly KafkaMessage[],
  deps: RouterDeps,
  batchScope: BatchScope,
  options: BatchOptions,
): Promise<string | undefined> {
  // A failing lane aborts its siblings' retry and backoff waits, so they stop within one record.
  const failure = linkedAbort(batchScope.signal);
  const scope: BatchScope = { ...batchScope, signal: failure.signal };
  const finished = new Array<boolean>(messages.length).fill(false);
  let next = 0;
  let lastResolved: string | undefined;
  /** Set when a lane throws: its siblings start no new record, and the error is rethrown once all settle. */
  let failed = false;
  const started = Date.now();
  const yields = () => options.yieldAfterMs !== undefined && Date.now() - started >= options.yieldAfterMs && (options.othersWaiting?.() ?? false);
  const stopped = () => failed || options.stopped() || yields();
  const done = (index: number) => {
    finished[index] = true;
    while (next < messages.length && finished[next] && !options.revoked()) {
      lastResolved = (messages[next] as KafkaMessage).offset;
      options.resolveOffset(lastResolved);
      next++;
    }
  };

  const lanes: number[][] = Array.from({ length: Math.max(1, options.lanes) }, () => []);
  messages.forEach((message, index) => {
    const lane = options.lanes <= 1 ? 0 : laneOf(message.key, options.lanes);
    (lanes[lane] as number[]).push(index);
  });

  const runLane = async (indices: readonly number[]): Promise<void> => {
    let pending: Array<{ index: number; ready: Ready }> = [];
    /** false once the router stops in the middle: the rest of the lane is left for the next run. */
    const flush = async (): Promise<boolean> => {
      const chunk = pending;
      pending = [];
      if (chunk.length === 0) return true;
      const outcomes: Array<Outcome | undefined> =
        chunk.length > 1 ? ((await applyChunk(chunk.map((c) => c.ready), deps, scope)) ?? []) : [];
      for (let i = 0; i < chunk.length; i++) {
        const item = chunk[i] as { index: number; ready: Ready };
        // A failed chunk (or a chunk of one): each record in its own transaction, retried, in order.
        const outcome = outcomes[i] ?? (await finishRecord(item.ready, deps, scope));
        if (outcome === 'aborted') return false;
        done(item.index);
      }
      await options.progress();
      return true;
    };
    const laneScope: BatchScope = { ...scope, applyPending: flush };

    for (const index of indices) {
      if (stopped()) break;
      // A record that will hold the lane (no handler, policy block) must not hold the ready ones before it.
      if (pending.length > 0 && blocksLane(topic, messages[index] as KafkaMessage, deps) && !(await flush())) return;
      const prepared = await prepareRecord(topic, partition, messages[index] as KafkaMessage, deps, laneScope);
      if (prepared.kind === 'aborted') break;
      if (options.maxTransactionRecords > 1 && chunkable(prepared, scope)) {
        pending.push({ index, ready: prepared });
        if (pending.length >= options.maxTransactionRecords && !(await flush())) return;
        continue;
      }
      if (!(await flush())) return;
      const outcome = await finishRecord(prepared, deps, scope);
      if (outcome === 'aborted') return;
      done(index);
      await options.progress();
    }
    // A batch that yields still applies the records it has prepared.
    if (!failed && !options.stopped()) await flush();
  };

  // Not Promise.all: it would return while sibling lanes still run handlers and resolve offsets, behind
  // kafkajs's back (the batch is over for it, the partition may be reassigned).
  const settled = await Promise.allSettled(
    lanes
      .filter((l) => l.length > 0)
      .map((indices) =>
        runLane(indices).catch((error: unknown) => {
          failed = true;
          failure.abort();
          throw error;
        }),
      ),
  );
  failure.dispose();
  const rejected = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (rejected) throw rejected.reason;
  return lastResolved;
}

/**
 * An AbortController that also aborts when `parent` does; dispose() unhooks it. Not AbortSignal.any:
 * one is made per batch, and a listener must not outlive its batch on the router's long-lived signal.
 */
export function linkedAbort(parent: AbortSignal): AbortController & { dispose(): void } {
  const controller = new AbortController();
  const forward = () => controller.abort();
  if (parent.aborted) controller.abort();
  else parent.addEventListener('abort', forward, { once: true });
  return Object.assign(controller, { dispose: () => parent.removeEventListener('abort', forward) });
}

/** FNV-1a over the key bytes: stable across processes, so a key's lane never depends on the instance. */
export function laneOf(key: Buffer | string | null | undefined, lanes: number): number {
  if (!key || lanes <= 1) return 0;
  const bytes = typeof key === 'string' ? Buffer.from(key) : key;
  let hash = 0x811c9dc5;
  for (const byte of bytes) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % lanes;
}
