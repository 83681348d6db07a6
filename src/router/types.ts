import type { PoolClient } from 'pg';
import type { EventMapShape } from '../codec/generate-types';

/** What a handler receives (docs/library.md). */
export interface RoutedEvent<P = unknown> {
  /** The outbox row's id (the `id` header); the inbox key. */
  id: string;
  aggregateType: string;
  /** The record key. */
  aggregateId: string;
  type: string;
  payload: P;
  /** The writer's extra headers (`{}` when it set none). */
  headers: Record<string, string>;
  traceparent?: string;
  /** The Kafka record's timestamp; the Event Router sets it from the change event. */
  createdAt?: Date;
}

export interface HandlerContext {
  /** The pg client of the inbox transaction: writes through it commit or roll back with the inbox row. */
  tx: PoolClient;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type EventHandler<P = any> = (event: RoutedEvent<P>, ctx: HandlerContext) => Promise<void>;

/**
 * Takes the fresh events (after inbox dedup) of one run of a chunk, in offset order, in the inbox
 * transaction: one set-based statement for many events (docs/library.md, "Batch handlers").
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type BatchHandler<P = any> = (events: ReadonlyArray<RoutedEvent<P>>, ctx: HandlerContext) => Promise<void>;

/**
 * What handles one event type: a per-event handler, or `{ batch }`. Consecutive fresh events of a chunk
 * whose types map to the SAME batch function go in one call, so one `{ batch }` object given to several
 * event types of an aggregate type batches that aggregate type as a whole.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type EventTypeHandler<P = any> = EventHandler<P> | { batch: BatchHandler<P> };

/**
 * aggregate type → event type → handler (per event, or `{ batch }`). With a generated EventMap
 * (`Handlers<EventMap>`, docs/library.md "Typed events") only the map's aggregate and event types are
 * keys, each optional, and each handler's `event.payload` has its type: a misspelled key does not compile.
 */
export type Handlers<M extends EventMapShape = EventMapShape> = string extends keyof M
  ? Readonly<Record<string, Readonly<Record<string, EventTypeHandler>>>>
  : { readonly [A in keyof M & string]?: { readonly [T in keyof M[A] & string]?: EventTypeHandler<M[A][T]> } };

export interface RouterStats {
  /** Records taken from Kafka (each redelivery counts again). */
  received: number;
  applied: number;
  /** Records whose id the inbox already held: skipped. */
  duplicates: number;
  /** Failed handler attempts that were tried again. */
  retries: number;
  deadLettered: number;
  /** Records of an event type without a handler, skipped (unknownEventType: 'skip'), and replays for another consumer. */
  skipped: number;
  /** Waits on the registry, the database or the DLQ producer (not the record's fault). */
  infrastructureRetries: number;
}

/** Namespaced router events; listeners that throw are ignored. */
export type RouterEventName =
  | 'router.applied'
  | 'router.duplicate'
  | 'router.retry'
  | 'router.dead-letter'
  | 'router.skipped'
  /** A replayed record for another consumer (x-replay-consumer): skipped, never applied here. */
  | 'router.replay-skipped'
  /** A wait on the registry, the database or the DLQ producer; `waitedMs` when it is a record's decode wait (ended by `router.wait-ended`). */
  | 'router.wait'
  /** A record's decode wait is over: decoded, dead-lettered, or cut short (`outcome`). */
  | 'router.wait-ended'
  /** A record past maxAttempts under the `block` policy: its partition waits on it. */
  | 'router.blocked'
  | 'router.unblocked'
  /** A multi-record transaction failed; its records are retried one per transaction. */
  | 'router.chunk-split'
  /** After each batch: records behind the partition's high watermark. */
  | 'router.lag'
  /** New routed topics appeared, or partitions were added to a subscribed one (`grown`); the consumer re-subscribed. */
  | 'router.topics-changed'
  /** The consumer joined its group (kafkajs GROUP_JOIN) with `assignment`: a hook for per-assignment state. */
  | 'router.group-join'
  /** A heartbeat during a batch found the group rebalancing: the batch stops, its partition is no longer ours. */
  | 'router.revoked'
  /** One inbox prune run: rows deleted, statements, duration, and the inbox's estimated row count after it. */
  | 'router.inbox-pruned'
  /** A partitioned inbox's run: partitions added ahead, dropped (their rows, the longest lock wait and hold) and kept past the window by reason. */
  | 'router.inbox-partitions'
  /** The inbox prune stopped (at every check while it stays so): a routed topic's records may live longer than the window, or its settings are unreadable. */
  | 'router.inbox-prune-blocked'
  /** The retention check passes again: the prune runs. */
  | 'router.inbox-prune-resumed'
  /** A housekeeping task (prune, parked gauges) failed; it runs again at its next interval. */
  | 'router.housekeeping-failed'
  /** The consumer's parked keys, events and the oldest one's age, read every parkedMetricsIntervalMs. */
  | 'router.parked';
export type RouterEventListener = (name: RouterEventName, data: Record<string, unknown>) => void;
