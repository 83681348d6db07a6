/**
 * How long a relay shard waits before its next claim. A full batch goes again at once. A claim that
 * found rows means more are likely on their way: the next claim comes after `minPollIntervalMs`. Each
 * claim that finds nothing doubles the wait, up to `pollIntervalMs`, so a busy shard follows its rows
 * within a few milliseconds and an idle one costs what a plain poll every `pollIntervalMs` costs.
 */
export function nextPollWait(previousWaitMs: number, claim: { claimed: number; full: boolean }, settings: { minPollIntervalMs: number; pollIntervalMs: number }): number {
  const floor = Math.min(settings.minPollIntervalMs, settings.pollIntervalMs);
  if (claim.full) return 0;
  if (claim.claimed > 0) return floor;
  return Math.min(settings.pollIntervalMs, Math.max(1, floor, previousWaitMs * 2));
}
