/**
 * Whether the relay is doing its job, for /healthz (docs/relay.md, "Health"). /readyz already drops a
 * shard whose last poll failed, but that flips back with the next empty claim: while its keys wait out
 * their backoff a failing shard claims nothing and looks idle. This remembers since when no publish has
 * worked instead:
 * - a batch whose every publish failed starts a failure streak (or continues it); a batch that published
 *   anything ends it (one poisoned key among working ones is a blocked key, not a broken relay);
 * - a claim that failed on the database side starts a database streak; any claim that works ends it;
 * - a backlog measured at 0 ends the publish streak: nothing is left to publish (the failed rows were
 *   deleted by hand), so an idle relay is healthy;
 * and the relay is unhealthy once either streak is `unhealthyAfterMs` old. Pure: the clock is injected.
 */
export interface PublishHealthVerdict {
  healthy: boolean;
  /** Why it is unhealthy; null when healthy. */
  reason: string | null;
  /** Since when every publish has failed (ISO 8601); null when the last batch published something. */
  failingSince: string | null;
  /** Batches in a row whose every publish failed. */
  failedBatches: number;
  /** Since when every claim has failed on the database side (ISO 8601). */
  dbFailingSince: string | null;
  /** When a row was last published by this instance (ISO 8601); null when none yet. */
  lastPublishedAt: string | null;
}

export interface PublishHealth {
  /** A claim transaction that claimed rows ended: `published` of them reached Kafka. */
  batch(published: number, failed: number): void;
  /** A claim (or an idle probe) worked on the database side. */
  claimOk(): void;
  claimFailed(): void;
  /** Rows still waiting, as the lag measurement counted them. */
  backlog(rows: number): void;
  verdict(): PublishHealthVerdict;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export function createPublishHealth(options: { unhealthyAfterMs: number; now?: () => number }): PublishHealth {
  const now = options.now ?? Date.now;
  let failingSince: number | null = null;
  let failedBatches = 0;
  let dbFailingSince: number | null = null;
  let lastPublishedAt: number | null = null;
  return {
    batch(published, failed) {
      if (published > 0) {
        lastPublishedAt = now();
        failingSince = null;
        failedBatches = 0;
      } else if (failed > 0) {
        failingSince ??= now();
        failedBatches++;
      }
    },
    claimOk() {
      dbFailingSince = null;
    },
    claimFailed() {
      dbFailingSince ??= now();
    },
    backlog(rows) {
      if (rows === 0) {
        failingSince = null;
        failedBatches = 0;
      }
    },
    verdict() {
      const at = now();
      const over = (since: number | null) => since !== null && at - since >= options.unhealthyAfterMs;
      const seconds = (since: number) => Math.round((at - since) / 1000);
      const reason = over(failingSince)
        ? `no row published for ${seconds(failingSince as number)} s: every publish failed (${failedBatches} batches in a row) while rows wait; check Kafka and the relay's log (relay.publish-failed)`
        : over(dbFailingSince)
          ? `every claim failed on the database side for ${seconds(dbFailingSince as number)} s; check PostgreSQL and the relay's log (relay.db-error)`
          : null;
      return { healthy: reason === null, reason, failingSince: iso(failingSince), failedBatches, dbFailingSince: iso(dbFailingSince), lastPublishedAt: iso(lastPublishedAt) };
    },
  };
}
