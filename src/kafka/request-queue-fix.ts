/**
 * kafkajs 2.2.4's RequestQueue re-arms a timer at the end of every check for pending requests, also when
 * none is pending and nothing is throttled: `throttledUntil` is -1, so the delay is negative (Node runs it
 * after 1 ms), and every connection that has ever answered a request checks its empty queue about a
 * thousand times a second for as long as it lives (kafkajs issues #1556 and #1704; the fixes proposed in
 * pull requests #1572, #1667 and #1703 were never merged, and kafkajs has had no release since 2023).
 * An idle router held several such connections: it was most of its CPU at rest.
 *
 * The replacement schedules a check only while requests wait: after the throttle time if one is in force,
 * else after kafkajs's own 10 ms interval. With nothing pending there is nothing to check; a push, a
 * fulfilled request and a timed-out request each check the queue themselves, as before.
 *
 * Applied once, to kafkajs 2.2.4 only (the version this was read in), when this module is loaded.
 */
import { createRequire } from 'node:module';

/** kafkajs's CHECK_PENDING_REQUESTS_INTERVAL (src/network/requestQueue/index.js). */
const CHECK_PENDING_REQUESTS_INTERVAL_MS = 10;
const FIXED_VERSION = '2.2.4';

interface RequestQueueShape {
  pending: unknown[];
  throttledUntil: number;
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
}

let applied: boolean | undefined;

/** Replaces RequestQueue.prototype.scheduleCheckPendingRequests; true when applied (now or before). */
export function fixRequestQueueIdleLoop(): boolean {
  if (applied !== undefined) return applied;
  applied = false;
  const load = createRequire(__filename);
  let queue: { prototype: RequestQueueShape } | undefined;
  try {
    const version = (load('kafkajs/package.json') as { version: string }).version;
    if (version !== FIXED_VERSION) return applied;
    queue = load('kafkajs/src/network/requestQueue/index.js') as { prototype: RequestQueueShape };
  } catch {
    return applied;
  }
  queue.prototype.scheduleCheckPendingRequests = function scheduleCheckPendingRequests(this: RequestQueueShape): void {
    if (this.throttleCheckTimeoutId || this.pending.length === 0) return;
    const throttled = this.throttledUntil - Date.now();
    this.throttleCheckTimeoutId = setTimeout(() => {
      this.throttleCheckTimeoutId = null;
      this.checkPendingRequests();
    }, throttled > 0 ? throttled : CHECK_PENDING_REQUESTS_INTERVAL_MS);
  };
  applied = true;
  return applied;
}
