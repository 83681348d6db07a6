import type { KafkaMessage, Message } from 'kafkajs';
import type { Pool } from 'pg';
import type { ZodType } from 'zod';
import type { Codec } from '../codec';
import { isOutboxError, type ErrorCode } from '../errors';
import { backoffDelay, sleepUnlessAborted, type BackoffSettings } from '../retry';
import { classifyDatabaseFailure, refusalFields } from './credential-watch';
import type { UnknownEventTypePolicy } from './options';
import type { ParkedKeys } from './parked';
import { DEFAULT_ENVELOPE, DLQ_HEADER, headerText, type EnvelopeSettings } from '../envelope';
import type { EventTypeHandler, Handlers, RoutedEvent, RouterEventName, RouterStats } from './types';

/**
 * A zod schema of a decoded payload, or one per schema version: a JSON event picks its version by the
 * `schemaVersion` entry of its headers (writeEvent's `schemaVersion` option); without one, the lowest.
 */
export type PayloadSchema = ZodType | { readonly versions: Readonly<Record<string | number, ZodType>> };

/** aggregate type → event type → the payload's zod schema, or one per schema version. */
export type PayloadSchemas = Readonly<Record<string, Readonly<Record<string, PayloadSchema>>>>;

export type Outcome = 'applied' | 'duplicate' | 'dead-lettered' | 'skipped' | 'aborted';

/** What happens to a record whose handler keeps failing (per aggregate type). */
export type FailurePolicy = 'dead-letter' | 'block';

/** Set by `outbox dlq:replay` on re-published dead letters. */
export const REPLAY_HEADER = DLQ_HEADER.replayedAt;

/** The codec as the router uses it: `checkRegistry` tells a stray unknown schema id from a registry that resolves nothing. */
export type RouterCodec = Pick<Codec, 'decode'> & Partial<Pick<Codec, 'checkRegistry'>>;

/** What every record of a router needs: built once by createRouter, replaced by fakes in unit tests. */
export interface RouterDeps {
  handlers: Handlers;
  codec: RouterCodec;
  pool: Pool;
  inboxTable: string;
  consumer: string;
  maxAttempts: number;
  backoff: BackoffSettings;
  /** Ceiling for waits on the registry, database or DLQ producer, which never give up. */
  infrastructureBackoff: BackoffSettings;
  aggregateTypeOf(topic: string): string;
  dlqTopicFor(topic: string, aggregateType: string): string;
  /** `source`: the routed topic the record came from. */
  sendDeadLetter(dlqTopic: string, message: Message, source: string): Promise<void>;
  stats: RouterStats;
  emit(name: RouterEventName, data: Record<string, unknown>): void;
  random?: () => number;
  /** Default: every aggregate type dead-letters. */
  policyFor?(aggregateType: string): FailurePolicy;
  /** An event type with no handler: dead-letter it (default), skip it, or block its partition. */
  unknownEventType?: UnknownEventTypePolicy;
  /** Per aggregate type, overriding unknownEventType. */
  unknownEventTypes?: Readonly<Record<string, UnknownEventTypePolicy>>;
  handlerTimeoutMs?: number;
  /** Optional zod schema per aggregate type and event type: the decoded payload must pass it. */
  payloadSchemas?: PayloadSchemas;
  /**
   * How long a record waits on a schema id the registry does not know before it is dead-lettered, if the
   * registry still resolves an id it resolved before (router.unknownSchemaIdWaitMs). 0 or absent: for ever.
   */
  unknownSchemaIdWaitMs?: number;
  /** Schema id → when this router first found it unknown: the wait is counted per id, not per record. */
  unknownSchemaIds?: Map<number, number>;
  /** `router.envelope`; absent: this project's own records (DEFAULT_ENVELOPE). */
  envelope?: Readonly<EnvelopeSettings>;
}

/** What belongs to one partition batch. */
export interface BatchScope {
  /** Kept alive between attempts so a long retry does not cost the partition. */
  heartbeat(): Promise<void>;
  /** Cuts waits short: the router stops, the partition is revoked, or a sibling lane failed. */
  signal: AbortSignal;
  /** The batch's parked keys; without it, keys are not parked (unit tests, or parking switched off). */
  parked?: ParkedKeys;
  /**
   * Applies the lane's records decoded before this one and not applied yet: called before a decode
   * waits, so a wait holds only the records after the one waiting. false when the router stopped meanwhile.
   */
  applyPending?(): Promise<boolean>;
}

export interface Failure {
  code: ErrorCode | string;
  message: string;
  attempts: number;
}

export interface Where {
  topic: string;
  partition: number;
  message: KafkaMessage;
  aggregateType: string;
  key: string;
}

/** A record decoded and ready for its inbox transaction. */
export interface Ready extends Where {
  kind: 'ready';
  event: RoutedEvent;
  handler: EventTypeHandler;
  replayed: boolean;
}

export type Prepared =
  | Ready
  | (Where & { kind: 'dead-letter'; failure: Failure; eventId?: string })
  | (Where & { kind: 'skip'; reason: string })
  /** No handler, under the `block` policy: its partition waits on it. */
  | (Where & { kind: 'block'; reason: string; eventId: string })
  | { kind: 'aborted' };

export function whereOf(where: Where): Record<string, unknown> {
  return { topic: where.topic, partition: where.partition, offset: where.message.offset, key: where.key };
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Waits out the registry, the database or the DLQ producer; false when the wait was cut short.
 * `waitedMs`: how long the record has waited so far, for a wait whose end is reported (`router.wait-ended`);
 * `maxDelayMs` shortens this sleep (to wake up when a bounded wait runs out).
 */
export async function waitForInfrastructure(
  error: unknown,
  wait: number,
  where: Record<string, unknown>,
  deps: RouterDeps,
  scope: BatchScope,
  options: { waitedMs?: number; maxDelayMs?: number } = {},
): Promise<boolean> {
  const delay = Math.min(backoffDelay(wait, deps.infrastructureBackoff, deps.random), options.maxDelayMs ?? Infinity);
  deps.stats.infrastructureRetries++;
  // A refused password or certificate names its hop and principal (credential-watch.ts, for /readyz).
  const failure = classifyDatabaseFailure(error, deps.pool);
  const code = isOutboxError(failure) ? failure.code : undefined;
  deps.emit('router.wait', { ...where, code, ...refusalFields(failure), error: messageOf(failure), delayMs: delay, waitedMs: options.waitedMs });
  if (!(await sleepUnlessAborted(delay, scope.signal))) return false;
  await scope.heartbeat();
  return true;
}

/** Counts an applied or duplicate record and emits its event. */
export function count(where: Where, result: 'applied' | 'duplicate', attempts: number, transactionMs: number, deps: RouterDeps): void {
  if (result === 'duplicate') deps.stats.duplicates++;
  else deps.stats.applied++;
  const { message } = where;
  deps.emit(result === 'duplicate' ? 'router.duplicate' : 'router.applied', {
    ...whereOf(where),
    id: headerText(message.headers, (deps.envelope ?? DEFAULT_ENVELOPE).idHeader),
    attempts,
    transactionMs,
    // Set by Connect's producer just after Debezium read the commit: the start of commit → handled.
    recordTimestamp: message.timestamp ? Number(message.timestamp) : undefined,
  });
}
