import { backoffDelay, type BackoffSettings } from '../retry';

/**
 * Head-of-line blocking per aggregate: an aggregate whose publish failed is left out of the claim
 * until its backoff ends, so nothing later of it is published past the failed event, while the
 * worker goes on with other aggregates. The failed rows stay unpublished and come first again when
 * the block ends (they are the oldest of their aggregate).
 */
export interface KeyBlocks {
  /** Blocks `aggregateId` after its `attempt`-th failure (1 = first); returns the delay. */
  block(aggregateId: string, attempt: number): number;
  /** Aggregate ids still blocked now; expired blocks are forgotten. */
  active(): string[];
  size(): number;
}

export function createKeyBlocks(backoff: BackoffSettings, now: () => number = Date.now, random: () => number = Math.random): KeyBlocks {
  const until = new Map<string, number>();
  return {
    block(aggregateId, attempt) {
      const delay = backoffDelay(Math.max(1, attempt), backoff, random);
      until.set(aggregateId, now() + delay);
      return delay;
    },
    active() {
      const at = now();
      const out: string[] = [];
      for (const [id, end] of until) {
        if (end <= at) until.delete(id);
        else out.push(id);
      }
      return out;
    },
    size: () => until.size,
  };
}
