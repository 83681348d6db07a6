import type { Admin, Consumer, Kafka, Producer } from 'kafkajs';
import type { Pool } from 'pg';
import type { Logger } from '../log';
import type { Emitter } from '../service';
import type { ResolvedSettings, RouterOptions } from './options';
import type { CredentialWatch } from './credential-watch';
import type { ParkedHints } from './parked';
import type { RouterDeps } from './record-context';
import type { RouterEventName, RouterStats } from './types';

/**
 * What the parts of one router share while it runs (create-router.ts wires them): its clients, the
 * consumer now in use and what is known about its group membership.
 */
export interface RouterRuntime {
  readonly options: RouterOptions;
  readonly settings: Readonly<ResolvedSettings>;
  readonly logger: Logger;
  readonly kafka: Kafka;
  readonly stats: RouterStats;
  readonly events: Emitter<RouterEventName>;
  readonly aggregateTypeOf: (topic: string) => string;
  readonly dlqTopicFor: (topic: string, aggregateType: string) => string;
  readonly heartbeatIntervalMs: number;
  /** Aborts when the router stops. */
  signal(): AbortSignal;
  /** True while the router runs (not starting, stopping or stopped). */
  running(): boolean;
  consumer?: Consumer;
  producer?: Producer;
  admin?: Admin;
  pool?: Pool;
  deps?: RouterDeps;
  /**
   * Commits the consumer's resolved offsets: kafkajs hands its commit out only in a batch's payload, so
   * the latest one is kept (its functions act on the consumer group, not on the batch). `all`: now;
   * otherwise only when COMMIT_INTERVAL_MS has passed since the last commit.
   */
  committer?: (all: boolean) => Promise<void>;
  /** In a consumer group with partitions assigned (false after a crash until kafkajs rejoins). */
  joined: boolean;
  /** The group is rebalancing (kafkajs REBALANCING, or a heartbeat said so) and has not joined again yet. */
  rebalancing: boolean;
  /** A consumer that is connected, subscribed and running (false while a re-subscribe is retried). */
  consuming: boolean;
  /** Batches being handled now; when one is left, the other partitions of its fetch wait on it. */
  batchesInHand: number;
  /** The routed topics subscribed now. */
  subscribed: Set<string>;
  /** Aggregate types known to have no parked key: their batches skip the parked-keys load. */
  readonly parkedHints: ParkedHints;
  /** The credential, ACL or TLS refusal keeping the router from working now, for /readyz. */
  readonly refusals: CredentialWatch;
}

/** Resolved offsets are committed at most this often while records flow (a crash redelivers at most this much). */
export const COMMIT_INTERVAL_MS = 1_000;

/** Commits what is resolved (see RouterRuntime.committer); a failure is logged, the next commit covers it. */
export async function commitOffsets(rt: RouterRuntime, all: boolean): Promise<void> {
  await rt.committer?.(all).catch((e: Error) => rt.logger.debug({ event: 'router.commit-failed', error: e.message }, 'router: offset commit failed; the next one covers it'));
}
