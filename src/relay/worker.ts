import { pgCode } from '../db';
import { backoffDelay, sleepUnlessAborted } from '../retry';
import { claimBatch } from './claim';
import { createKeyBlocks } from './key-blocks';
import { nextPollWait } from './poll-wait';
import type { Sender } from './publish';
import { messageOf, type RelayRuntime } from './runtime';

/**
 * One shard's worker: claims until the signal aborts. A full batch goes again at once, otherwise it
 * waits (nextPollWait; a notification ends an idle wait). A database error, or a batch whose every
 * publish failed, backs the shard off (jittered, doubling) and marks it failing until a claim works.
 */
export async function runWorker(rt: RelayRuntime, sender: Sender, shard: number, signal: AbortSignal): Promise<void> {
  const { settings } = rt;
  const keyBlocks = (rt.blocks[shard] = createKeyBlocks(rt.backoff, Date.now, rt.random));
  let dbFailures = 0;
  let sendFailures = 0;
  let idle = false;
  /** The last idle wait: claims that find rows shorten it, empty ones double it (nextPollWait). */
  let pollWait = settings.pollIntervalMs;
  while (!signal.aborted) {
    let wait = settings.pollIntervalMs;
    let wakeable = true;
    try {
      const { claimed, full, allFailed } = await claimBatch(rt, sender, shard, keyBlocks, idle);
      idle = claimed === 0;
      dbFailures = 0;
      rt.publishHealth.claimOk();
      sendFailures = allFailed ? sendFailures + 1 : 0;
      if (allFailed) rt.failing.add(shard);
      else rt.failing.delete(shard);
      // Every key failed: the broker is likely down, back off the whole shard.
      if (allFailed) {
        wait = backoffDelay(sendFailures, rt.backoff, rt.random);
        wakeable = false;
      } else {
        wait = pollWait = nextPollWait(pollWait, { claimed, full }, settings);
        if (wait === 0) continue;
      }
    } catch (error) {
      dbFailures++;
      rt.stats.dbErrors++;
      rt.failing.add(shard);
      rt.publishHealth.claimFailed();
      wait = backoffDelay(dbFailures, rt.backoff, rt.random);
      wakeable = false;
      rt.events.emit('relay.db-error', { shard, code: pgCode(error), error: messageOf(error), retryInMs: wait });
    }
    // A notification ends an idle wait, never a backoff: new rows do not mend a broken broker or database.
    if (wakeable) await rt.wake.sleep(shard, wait, signal);
    else await sleepUnlessAborted(wait, signal);
  }
}
