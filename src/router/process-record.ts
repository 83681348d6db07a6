import type { KafkaMessage, Message } from 'kafkajs';
import type { Pool } from 'pg';
import type { Codec } from '../codec';
import { isOutboxError, OutboxError, type ErrorCode } from '../errors';
import { backoffDelay, sleepUnlessAborted, type BackoffSettings } from '../retry';
import { buildDeadLetter } from './dead-letter';
import { applyOnce, HandlerFailed, InboxUnavailable } from './inbox-transaction';
import { parseRecordHeaders, type RecordHeaders } from './record-headers';
import type { Handlers, RouterEventName, RouterStats } from './types';

export type Outcome = 'applied' | 'duplicate' | 'dead-lettered' | 'aborted';

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
}

interface Failure {
  code: ErrorCode | string;
  message: string;
  attempts: number;
}

/**
 * One record, start to end: headers → handler lookup → decode → inbox + handler in one transaction,
 * retried; or a dead letter. Never throws for a record's content; resolves 'aborted' only when the
 * router stops in the middle, and the record is then left for the next run.
 */
export async function processRecord(topic: string, partition: number, message: KafkaMessage, deps: RecordDeps): Promise<Outcome> {
  deps.stats.received++;
  const aggregateType = deps.aggregateTypeOf(topic);
  const where = { topic, partition, offset: message.offset };
  const deadLetter = (failure: Failure) => sendDeadLetter(topic, partition, message, aggregateType, failure, deps);

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
    return deadLetter({
      code: 'HANDLER_NOT_FOUND',
      message: `No handler for aggregate type ${JSON.stringify(aggregateType)}, event type ${JSON.stringify(headers.eventType)}; handled here: ${known.length ? known.join(', ') : '(none for this aggregate type)'}.`,
      attempts: 1,
    });
  }

  let payload: unknown;
  for (let wait = 1; ; wait++) {
    try {
      payload = await deps.codec.decode(message.value as Buffer, headers.contentType);
      break;
    } catch (error) {
      if (!(isOutboxError(error) && error.retriable)) return deadLetter(failureOf(error, 1));
      if (!(await waitForInfrastructure(error, wait, where, deps))) return 'aborted';
    }
  }

  const event = {
    id: headers.id,
    aggregateType,
    aggregateId: message.key ? message.key.toString('utf8') : '',
    type: headers.eventType,
    payload,
    headers: headers.extra,
    traceparent: headers.traceparent,
    createdAt: message.timestamp ? new Date(Number(message.timestamp)) : undefined,
  };
  let attempt = 1;
  for (let wait = 1; ; ) {
    try {
      const started = Date.now();
      const result = await applyOnce(deps.pool, deps.inboxTable, deps.consumer, headers.id, (tx) => handler(event, { tx }));
      if (result === 'duplicate') deps.stats.duplicates++;
      else deps.stats.applied++;
      deps.emit(result === 'duplicate' ? 'router.duplicate' : 'router.applied', {
        ...where,
        id: headers.id,
        attempts: attempt,
        transactionMs: Date.now() - started,
        // Set by Connect's producer just after Debezium read the commit: the start of commit → handled.
        recordTimestamp: message.timestamp ? Number(message.timestamp) : undefined,
      });
      return result;
    } catch (error) {
      if (error instanceof InboxUnavailable) {
        if (!(await waitForInfrastructure(error.cause, wait++, where, deps))) return 'aborted';
        continue;
      }
      const cause = error instanceof HandlerFailed ? error.cause : error;
      // A handler may say "this will never work" with a non-retriable OutboxError: no point retrying.
      const hopeless = isOutboxError(cause) && !cause.retriable;
      if (hopeless || attempt >= deps.maxAttempts) {
        return deadLetter({ code: isOutboxError(cause) ? cause.code : 'HANDLER_FAILED', message: messageOf(cause), attempts: attempt });
      }
      const delay = backoffDelay(attempt, deps.backoff, deps.random);
      deps.stats.retries++;
      deps.emit('router.retry', { ...where, id: headers.id, attempt, delayMs: delay, error: messageOf(cause) });
      if (!(await sleepUnlessAborted(delay, deps.signal))) return 'aborted';
      await deps.heartbeat();
      attempt++;
    }
  }
}

async function sendDeadLetter(topic: string, partition: number, message: KafkaMessage, aggregateType: string, failure: Failure, deps: RecordDeps): Promise<Outcome> {
  const dlqTopic = deps.dlqTopicFor(topic, aggregateType);
  const letter = buildDeadLetter({
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
  // A record is never skipped without its dead letter: if the DLQ cannot be written, wait for it.
  for (let wait = 1; ; wait++) {
    try {
      await deps.sendDeadLetter(dlqTopic, letter);
      deps.stats.deadLettered++;
      deps.emit('router.dead-letter', { topic, partition, offset: message.offset, dlqTopic, code: failure.code, error: failure.message, attempts: failure.attempts });
      return 'dead-lettered';
    } catch (error) {
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
