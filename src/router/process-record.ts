import type { KafkaMessage, Message } from 'kafkajs';
import type { Pool, PoolClient } from 'pg';
import type { ZodType } from 'zod';
import type { Codec } from '../codec';
import { isOutboxError, OutboxError, type ErrorCode } from '../errors';
import { backoffDelay, sleepUnlessAborted, type BackoffSettings } from '../retry';
import { buildDeadLetter, isRetriableSendError, reduceDeadLetter } from './dead-letter';
import { applyMany, applyOnce, HandlerFailed, InboxUnavailable } from './inbox-transaction';
import type { UnknownEventTypePolicy } from './options';
import { ParkedKeysStale, type ParkedKeys } from './parked';
import { headerText, parseRecordHeaders, type RecordHeaders } from './record-headers';
import type { EventHandler, Handlers, RoutedEvent, RouterEventName, RouterStats } from './types';

/** aggregate type → event type → a zod schema of the decoded payload. */
export type PayloadSchemas = Readonly<Record<string, Readonly<Record<string, ZodType>>>>;

export type Outcome = 'applied' | 'duplicate' | 'dead-lettered' | 'skipped' | 'aborted';

/** What happens to a record whose handler keeps failing (per aggregate type). */
export type FailurePolicy = 'dead-letter' | 'block';

/** Set by `outbox dlq:replay` on re-published dead letters. */
export const REPLAY_HEADER = 'x-replayed-at';

/** Everything one record needs; built once by createRouter, replaced by fakes in unit tests. */
export interface RecordDeps {
  handlers: Handlers;
  codec: Pick<Codec, 'decode'>;
  pool: Pool;
  inboxTable: string;
  consumer: string;
  maxAttempts: number;
  backoff: BackoffSettings;
  /** Ceiling for waits on the registry, database or DLQ producer, which never give up. */
  infrastructureBackoff: BackoffSettings;
  aggregateTypeOf(topic: string): string;
  dlqTopicFor(topic: string, aggregateType: string): string;
  sendDeadLetter(topic: string, message: Message): Promise<void>;
  /** Kept alive between attempts so a long retry does not cost the partition. */
  heartbeat(): Promise<void>;
  signal: AbortSignal;
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
  /** The batch's parked keys; without it, keys are not parked (unit tests, or parking switched off). */
  parked?: ParkedKeys;
}

interface Failure {
  code: ErrorCode | string;
  message: string;
  attempts: number;
}

interface Where {
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
  handler: EventHandler;
  replayed: boolean;
}

export type Prepared =
  | Ready
  | (Where & { kind: 'dead-letter'; failure: Failure; eventId?: string })
  | (Where & { kind: 'skip'; reason: string })
  | { kind: 'aborted' };

/**
 * One record, start to end: headers → handler lookup → decode → inbox + handler in one transaction,
 * retried; or a dead letter. Never throws for a record's content; resolves 'aborted' only when the
 * router stops in the middle, and the record is then left for the next run. Throws DLQ_REJECTED (not
 * retriable, so kafkajs stops the consumer) when the DLQ refuses even a reduced dead letter for good.
 */
export async function processRecord(topic: string, partition: number, message: KafkaMessage, deps: RecordDeps): Promise<Outcome> {
  return finishRecord(await prepareRecord(topic, partition, message, deps), deps);
}

/** Headers, handler lookup and decode (waiting out a registry outage): nothing is written yet. */
export async function prepareRecord(topic: string, partition: number, message: KafkaMessage, deps: RecordDeps): Promise<Prepared> {
  deps.stats.received++;
  const aggregateType = deps.aggregateTypeOf(topic);
  const where: Where = { topic, partition, message, aggregateType, key: message.key ? message.key.toString('utf8') : '' };
  const deadLetter = (failure: Failure, eventId?: string): Prepared => ({ ...where, kind: 'dead-letter', failure, eventId });

  let headers: RecordHeaders;
  try {
    headers = parseRecordHeaders(message.headers);
    if (message.value === null || message.value === undefined) {
      throw new OutboxError('RECORD_INVALID', 'The record has no value (a tombstone?); routed outbox records always carry the payload.', {});
    }
  } catch (error) {
    return deadLetter(failureOf(error, 1));
  }
  const handler = deps.handlers[aggregateType]?.[headers.eventType];
  if (!handler) {
    const known = Object.keys(deps.handlers[aggregateType] ?? {});
    const reason = `No handler for aggregate type ${JSON.stringify(aggregateType)}, event type ${JSON.stringify(headers.eventType)}; handled here: ${known.length ? known.join(', ') : '(none for this aggregate type)'}.`;
    const policy = deps.unknownEventTypes?.[aggregateType] ?? deps.unknownEventType ?? 'dead-letter';
    if (policy === 'skip') return { ...where, kind: 'skip', reason };
    if (policy === 'block') {
      // A producer deployed the type before this consumer: hold the partition (order intact, nothing
      // lost) until the router stops or a rebalance hands the partition to a router with the handler.
      deps.emit('router.blocked', { ...whereOf(where), id: headers.id, error: reason });
      try {
        while (await sleepUnlessAborted(deps.backoff.maxDelayMs, deps.signal)) await deps.heartbeat();
      } finally {
        deps.emit('router.unblocked', { ...whereOf(where), id: headers.id, aborted: true });
      }
      return { kind: 'aborted' };
    }
    return deadLetter({ code: 'HANDLER_NOT_FOUND', message: reason, attempts: 1 }, headers.id);
  }

  let payload: unknown;
  for (let wait = 1; ; wait++) {
    try {
      payload = await deps.codec.decode(message.value as Buffer, headers.contentType);
      break;
    } catch (error) {
      if (!(isOutboxError(error) && error.retriable)) return deadLetter(failureOf(error, 1), headers.id);
      if (!(await waitForInfrastructure(error, wait, whereOf(where), deps))) return { kind: 'aborted' };
    }
  }

  const schema = deps.payloadSchemas?.[aggregateType]?.[headers.eventType];
  if (schema) {
    const checked = schema.safeParse(payload);
    if (!checked.success) {
      const problems = checked.error.issues.slice(0, 10).map((i) => `${i.path.join('.') || '(payload)'}: ${i.message}`);
      return deadLetter(
        { code: 'PAYLOAD_INVALID', message: `The ${aggregateType}.${headers.eventType} payload fails its schema: ${problems.join('; ')}.`, attempts: 1 },
        headers.id,
      );
    }
    payload = checked.data;
  }

  const event: RoutedEvent = {
    id: headers.id,
    aggregateType,
    aggregateId: where.key,
    type: headers.eventType,
    payload,
    headers: headers.extra,
    traceparent: headers.traceparent,
    createdAt: message.timestamp ? new Date(Number(message.timestamp)) : undefined,
  };
  return { ...where, kind: 'ready', event, handler, replayed: headerText(message.headers, REPLAY_HEADER) !== undefined };
}

/** Can this record share a transaction with its neighbours? Not when its key is parked or it is a replay. */
export function chunkable(prepared: Prepared, deps: RecordDeps): prepared is Ready {
  return prepared.kind === 'ready' && !prepared.replayed && deps.parked?.earliest(prepared.key) === undefined;
}

/** One prepared record in its own transaction (retried), or its dead letter, or its skip. */
export async function finishRecord(prepared: Prepared, deps: RecordDeps): Promise<Outcome> {
  if (prepared.kind === 'aborted') return 'aborted';
  if (prepared.kind === 'skip') {
    deps.stats.skipped++;
    deps.emit('router.skipped', { ...whereOf(prepared), reason: prepared.reason });
    return 'skipped';
  }
  if (prepared.kind === 'dead-letter') return deadLetterAndPark(prepared, prepared.failure, prepared.eventId, deps);
  for (;;) {
    const outcome = await applyReady(prepared, deps);
    if (outcome !== 'stale') return outcome;
    // Another router parked this key after the batch loaded: decide again on the key's head as it is now.
    for (let wait = 1; ; wait++) {
      try {
        await deps.parked?.reload([prepared.key]);
        break;
      } catch (error) {
        if (!(await waitForInfrastructure(error, wait, whereOf(prepared), deps))) return 'aborted';
      }
    }
  }
}

/** 'stale': the batch's parked keys were out of date (ParkedKeysStale); nothing was committed. */
async function applyReady(prepared: Ready, deps: RecordDeps): Promise<Outcome | 'stale'> {
  const { event, handler, key } = prepared;
  const parked = deps.parked;
  const earliest = parked?.earliest(key);
  const releases = earliest !== undefined && prepared.replayed && earliest === event.id;
  if (earliest !== undefined && !releases) {
    return deadLetterAndPark(
      prepared,
      {
        code: 'KEY_PARKED',
        message: `Key ${JSON.stringify(key)} has an earlier dead-lettered event (${earliest}); later events of the key follow it to the dead-letter topic until it is replayed (outbox dlq:replay --key ${key}) or released (outbox dlq:release).`,
        attempts: 1,
      },
      event.id,
      deps,
    );
  }
  let nextHead: Awaited<ReturnType<ParkedKeys['releaseIn']>>;
  const afterInbox = !parked
    ? undefined
    : releases
      ? async (tx: PoolClient) => {
          nextHead = await parked.releaseIn(tx, key, event.id);
        }
      : (tx: PoolClient) => parked.guardIn(tx, [key]);

  let attempt = 1;
  let blocked = false;
  for (let wait = 1; ; ) {
    try {
      const started = Date.now();
      const result = await applyOnce(deps.pool, deps.inboxTable, deps.consumer, event.id, (tx) => handler(event, { tx }), {
        handlerTimeoutMs: deps.handlerTimeoutMs,
        afterInbox,
      });
      if (releases) parked?.released(key, nextHead);
      if (blocked) deps.emit('router.unblocked', { ...whereOf(prepared), id: event.id, attempts: attempt });
      count(prepared, result, attempt, Date.now() - started, deps);
      return result;
    } catch (error) {
      if (error instanceof InboxUnavailable) {
        if (error.cause instanceof ParkedKeysStale) return 'stale';
        if (!(await waitForInfrastructure(error.cause, wait++, whereOf(prepared), deps))) return 'aborted';
        continue;
      }
      const cause = error instanceof HandlerFailed ? error.cause : error;
      // A handler may say "this will never work" with a non-retriable OutboxError: no point retrying.
      const hopeless = isOutboxError(cause) && !cause.retriable;
      const policy = deps.policyFor?.(prepared.aggregateType) ?? 'dead-letter';
      if ((hopeless || attempt >= deps.maxAttempts) && policy === 'dead-letter') {
        return deadLetterAndPark(prepared, { code: isOutboxError(cause) ? cause.code : 'HANDLER_FAILED', message: messageOf(cause), attempts: attempt }, event.id, deps);
      }
      if ((hopeless || attempt >= deps.maxAttempts) && !blocked) {
        // `block`: the partition waits on this record, retrying at the backoff ceiling, so order holds strictly.
        blocked = true;
        deps.emit('router.blocked', { ...whereOf(prepared), id: event.id, attempts: attempt, error: messageOf(cause) });
      }
      const delay = backoffDelay(attempt, deps.backoff, deps.random);
      deps.stats.retries++;
      deps.emit('router.retry', { ...whereOf(prepared), id: event.id, attempt, delayMs: delay, error: messageOf(cause) });
      if (!(await sleepUnlessAborted(delay, deps.signal))) {
        if (blocked) deps.emit('router.unblocked', { ...whereOf(prepared), id: event.id, attempts: attempt, aborted: true });
        return 'aborted';
      }
      await deps.heartbeat();
      attempt++;
    }
  }
}

/**
 * Several ready records in one inbox transaction. Returns undefined when it fails (nothing was
 * committed): the caller then takes them one by one, with retries and dead letters.
 */
export async function applyChunk(chunk: readonly Ready[], deps: RecordDeps): Promise<Outcome[] | undefined> {
  const started = Date.now();
  const parked = deps.parked;
  let results: Outcome[];
  try {
    results = await applyMany(
      deps.pool,
      deps.inboxTable,
      deps.consumer,
      chunk.map((r, i) => ({
        id: r.event.id,
        run: (tx) => r.handler(r.event, { tx }),
        // Once per chunk, after its handlers: none of its keys (unparked at load) was parked since.
        afterInbox: parked && i === chunk.length - 1 ? (tx) => parked.guardIn(tx, chunk.map((c) => c.key)) : undefined,
      })),
      { handlerTimeoutMs: deps.handlerTimeoutMs },
    );
  } catch (error) {
    const cause = error instanceof HandlerFailed || error instanceof InboxUnavailable ? error.cause : error;
    deps.emit('router.chunk-split', { topic: chunk[0]?.topic, partition: chunk[0]?.partition, records: chunk.length, error: messageOf(cause) });
    return undefined;
  }
  const ms = Date.now() - started;
  chunk.forEach((r, i) => count(r, results[i] as 'applied' | 'duplicate', 1, ms, deps));
  return results;
}

function count(where: Where, result: 'applied' | 'duplicate', attempts: number, transactionMs: number, deps: RecordDeps): void {
  if (result === 'duplicate') deps.stats.duplicates++;
  else deps.stats.applied++;
  const { message } = where;
  deps.emit(result === 'duplicate' ? 'router.duplicate' : 'router.applied', {
    ...whereOf(where),
    id: headerText(message.headers, 'id'),
    attempts,
    transactionMs,
    // Set by Connect's producer just after Debezium read the commit: the start of commit → handled.
    recordTimestamp: message.timestamp ? Number(message.timestamp) : undefined,
  });
}

function whereOf(where: Where): Record<string, unknown> {
  return { topic: where.topic, partition: where.partition, offset: where.message.offset, key: where.key };
}

/** The dead letter, then (policy permitting) the key parked so its later events follow. */
async function deadLetterAndPark(where: Where, failure: Failure, eventId: string | undefined, deps: RecordDeps): Promise<Outcome> {
  const outcome = await sendDeadLetter(where.topic, where.partition, where.message, where.aggregateType, failure, deps);
  if (outcome !== 'dead-lettered' || !deps.parked || where.key === '') return outcome;
  const id = eventId ?? `offset:${where.topic}/${where.partition}/${where.message.offset}`;
  for (let wait = 1; ; wait++) {
    try {
      await deps.parked.park(where.key, id, String(failure.code));
      return outcome;
    } catch (error) {
      // The dead letter is written; a redelivery would write it again (harmless: replay goes through the inbox).
      if (!(await waitForInfrastructure(error, wait, whereOf(where), deps))) return 'aborted';
    }
  }
}

async function sendDeadLetter(topic: string, partition: number, message: KafkaMessage, aggregateType: string, failure: Failure, deps: RecordDeps): Promise<Outcome> {
  const dlqTopic = deps.dlqTopicFor(topic, aggregateType);
  let letter = buildDeadLetter({
    topic,
    partition,
    offset: message.offset,
    key: message.key,
    value: message.value,
    headers: message.headers,
    errorCode: failure.code,
    errorMessage: failure.message,
    attempts: failure.attempts,
  });
  let reduced = false;
  // A record is never skipped without its dead letter: if the DLQ is unavailable, wait for it. Waiting
  // is only for what can come back (kafkajs says retriable); a refusal that will repeat is not waited on.
  for (let wait = 1; ; wait++) {
    try {
      await deps.sendDeadLetter(dlqTopic, letter);
      deps.stats.deadLettered++;
      deps.emit('router.dead-letter', { topic, partition, offset: message.offset, dlqTopic, code: failure.code, error: failure.message, attempts: failure.attempts, reduced });
      return 'dead-lettered';
    } catch (error) {
      if (!isRetriableSendError(error)) {
        if (reduced) {
          throw new OutboxError(
            'DLQ_REJECTED',
            `${dlqTopic} refused the dead letter of ${topic}/${partition}@${message.offset}, even without its value and headers: ${messageOf(error)}. The router stops rather than skip the record or wait forever; fix the DLQ topic (write access, max.message.bytes) and restart it.`,
            { retriable: false, cause: error, details: { dlqTopic, topic, partition, offset: message.offset } },
          );
        }
        // Too large, an invalid record, a header kafkajs cannot encode: keep the event's identity and why.
        letter = reduceDeadLetter(letter, messageOf(error));
        reduced = true;
        continue;
      }
      const unavailable = new OutboxError('DLQ_UNAVAILABLE', `Cannot write the dead letter to ${dlqTopic}: ${messageOf(error)}`, { retriable: true, cause: error });
      if (!(await waitForInfrastructure(unavailable, wait, { topic, partition, offset: message.offset }, deps))) return 'aborted';
    }
  }
}

async function waitForInfrastructure(error: unknown, wait: number, where: Record<string, unknown>, deps: RecordDeps): Promise<boolean> {
  const delay = backoffDelay(wait, deps.infrastructureBackoff, deps.random);
  deps.stats.infrastructureRetries++;
  deps.emit('router.wait', { ...where, code: isOutboxError(error) ? error.code : undefined, error: messageOf(error), delayMs: delay });
  if (!(await sleepUnlessAborted(delay, deps.signal))) return false;
  await deps.heartbeat();
  return true;
}

function failureOf(error: unknown, attempts: number): Failure {
  return { code: isOutboxError(error) ? error.code : 'DECODE_FAILED', message: messageOf(error), attempts };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
