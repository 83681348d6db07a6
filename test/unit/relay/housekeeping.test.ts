import { createKeyBlocks, runCleanup } from '../../../src/relay';

describe('runCleanup: retention in batches', () => {
  it('deletes batch after batch until one comes back short', async () => {
    const remaining = { n: 23 };
    const limits: number[] = [];
    const result = await runCleanup(
      async (limit) => {
        limits.push(limit);
        const n = Math.min(limit, remaining.n);
        remaining.n -= n;
        return n;
      },
      { batchSize: 10 },
    );
    expect(limits).toEqual([10, 10, 10]);
    expect(result).toEqual({ deleted: 23, batches: 3 });
  });

  it('an exact multiple needs one more (empty) batch to know it is done', async () => {
    let left = 20;
    const result = await runCleanup(async (limit) => {
      const n = Math.min(limit, left);
      left -= n;
      return n;
    }, { batchSize: 10 });
    expect(result).toEqual({ deleted: 20, batches: 3 });
  });

  it('stops at maxBatches under a steady stream, and at once when aborted', async () => {
    expect(await runCleanup(async (limit) => limit, { batchSize: 5, maxBatches: 4 })).toEqual({ deleted: 20, batches: 4 });
    const abort = new AbortController();
    let calls = 0;
    const result = await runCleanup(
      async (limit) => {
        calls++;
        if (calls === 2) abort.abort();
        return limit;
      },
      { batchSize: 5, signal: abort.signal },
    );
    expect(result).toEqual({ deleted: 10, batches: 2 });
  });
});

describe('key blocks: head-of-line blocking per aggregate', () => {
  it('holds a failed key back for its backoff, growing with attempts, then lets it go', () => {
    let now = 1_000;
    const blocks = createKeyBlocks({ initialDelayMs: 100, maxDelayMs: 1_000 }, () => now, () => 0.999);
    expect(blocks.block('a', 1)).toBe(100);
    expect(blocks.block('b', 3)).toBe(400);
    expect(blocks.block('c', 10)).toBe(1_000); // capped
    expect(blocks.active().sort()).toEqual(['a', 'b', 'c']);
    now += 150;
    expect(blocks.active().sort()).toEqual(['b', 'c']);
    expect(blocks.size()).toBe(2);
    now += 1_000;
    expect(blocks.active()).toEqual([]);
    expect(blocks.size()).toBe(0);
  });

  it('a new failure of a blocked key moves its end', () => {
    let now = 0;
    const blocks = createKeyBlocks({ initialDelayMs: 100, maxDelayMs: 10_000 }, () => now, () => 0);
    blocks.block('a', 1); // 50 with zero jitter
    now = 40;
    blocks.block('a', 4); // 400 from now
    now = 300;
    expect(blocks.active()).toEqual(['a']);
  });
});
