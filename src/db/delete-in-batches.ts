export interface CleanupOptions {
  batchSize: number;
  /** Upper bound of DELETE statements per run, so one run cannot go on forever under a steady stream. */
  maxBatches?: number;
  signal?: AbortSignal;
}

/**
 * Deletes published rows past retention in batches: one short DELETE of at most `batchSize` rows per
 * statement (its own transaction), until a batch comes back short. Small batches keep locks, WAL bursts
 * and replication lag small, and a stopping relay is never held up by a long delete.
 */
export async function runCleanup(deleteBatch: (limit: number) => Promise<number>, options: CleanupOptions): Promise<{ deleted: number; batches: number }> {
  const maxBatches = options.maxBatches ?? 1_000;
  let deleted = 0;
  let batches = 0;
  while (batches < maxBatches && !options.signal?.aborted) {
    const n = await deleteBatch(options.batchSize);
    batches++;
    deleted += n;
    if (n < options.batchSize) break;
  }
  return { deleted, batches };
}
