/** Counters of one relay instance since start(). */
export interface RelayStats {
  /** Rows published (each republish after a failure counts again). */
  published: number;
  /** Rows whose publish failed (their key was blocked and retried later). */
  failed: number;
  /** Claim transactions that claimed at least one row. */
  batches: number;
  /** Polls that found nothing (idle, or another instance held the shard). */
  emptyClaims: number;
  /** Every statement sent to PostgreSQL (BEGIN and COMMIT included): the relay's database load. */
  queries: number;
  /** Published rows deleted after retention. */
  deleted: number;
  /** Age of the oldest unpublished row at the last measurement, in seconds. */
  lagSeconds: number;
  /** Aggregates currently held back after a failed publish. */
  blockedKeys: number;
  /** Unpublished rows at the last measurement (every instance's), counted up to 10,000 (backlogCapped). */
  backlog: number;
  backlogCapped: boolean;
  /** Claim transactions that failed on the database side (rolled back, retried). */
  dbErrors: number;
  /** Notifications (and LISTEN reconnects) that woke the idle workers (relay.notify). */
  wakes: number;
}

/** Namespaced relay events; listeners that throw are ignored. */
export type RelayEventName = 'relay.started' | 'relay.batch' | 'relay.publish-failed' | 'relay.db-error' | 'relay.lag' | 'relay.cleanup' | 'relay.listen' | 'relay.stopped';
export type RelayEventListener = (name: RelayEventName, data: Record<string, unknown>) => void;
