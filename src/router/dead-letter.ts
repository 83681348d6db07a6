import type { IHeaders, Message } from 'kafkajs';
import { DEAD_LETTER_HEADERS, DLQ_HEADER, HEADER, headerText } from '../envelope';
import { isOutboxError, OutboxError } from '../errors';
import { credentialFailureKind, isCredentialFailure } from '../errors/credentials';
import { HandlerSpans } from './handler-spans';
import { messageOf, waitForInfrastructure, whereOf, type BatchScope, type Failure, type Outcome, type RouterDeps, type Where } from './record-context';

/** What is known about a record that is given up on. */
export interface DeadLetterInput {
  topic: string;
  partition: number;
  offset: string;
  key: Buffer | string | null;
  value: Buffer | string | null;
  headers?: IHeaders;
  errorCode: string;
  errorMessage: string;
  attempts: number;
  /** The router consumer giving up on the record (x-consumer). */
  consumer: string;
  /** The record's Kafka timestamp (epoch ms as text, as kafkajs gives it). */
  timestamp?: string;
  /** Now, in epoch ms (tests). */
  now?: number;
}

/** Kafka puts no limit on header size, but a stack trace in every dead letter helps nobody. */
export const MAX_ERROR_MESSAGE_CHARS = 2_000;

/** Set on a dead letter whose original value and headers the DLQ refused: only the event's identity is kept. */
export const REDUCED_HEADER = DLQ_HEADER.reduced;
export { DEAD_LETTER_HEADERS };

type HeaderValue = Buffer | string;

/**
 * Headers as kafkajs can always encode them: each value a Buffer or a string (bytes are kept as they
 * are, so a non-UTF-8 value survives), an array only of those. A null or undefined value is dropped:
 * kafkajs 2.2.4 cannot encode a null header value (a TypeError on send), and the Event Router sends
 * `traceparent` and `headers` as null for NULL columns. The router reads an absent header exactly as a
 * null one (record-headers.ts), so dropping it changes nothing for the event. Anything else (a number
 * from a caller) becomes its string. Used for every dead letter and every replay.
 */
export function sanitizeHeaders(headers: IHeaders | undefined, drop?: (name: string) => boolean): IHeaders {
  const clean: IHeaders = {};
  for (const [name, raw] of Object.entries(headers ?? {})) {
    if (drop?.(name)) continue;
    const values = (Array.isArray(raw) ? raw : [raw]).filter((v) => v !== null && v !== undefined).map(headerValue);
    if (values.length === 1) clean[name] = values[0] as HeaderValue;
    else if (values.length > 1) clean[name] = values;
  }
  return clean;
}

function headerValue(value: unknown): HeaderValue {
  return Buffer.isBuffer(value) || typeof value === 'string' ? value : String(value);
}

/**
 * When the event was first dead-lettered, for `dlq:replay --all`'s horizon: the value the record carries
 * (a replayed record keeps its letter's), else now, or the record's own timestamp when earlier: an
 * event can be applied before its first dead letter (a redelivery of an applied event to a key parked
 * since), never before its record was written. Epoch ms as text.
 */
function firstDeadLetteredAt(input: DeadLetterInput): string {
  const carried = Number(headerText(input.headers, DLQ_HEADER.firstDeadLetteredAt));
  if (Number.isSafeInteger(carried) && carried > 0) return String(carried);
  const now = input.now ?? Date.now();
  const written = Number(input.timestamp);
  return String(Number.isSafeInteger(written) && written > 0 ? Math.min(now, written) : now);
}

/**
 * The dead letter: the original key, value and headers (sanitized, see sanitizeHeaders), so
 * `dlq:replay` can re-publish it, plus `x-` headers saying where it came from, why and by which
 * consumer it was given up on, and since when the event has been dead-lettered.
 */
export function buildDeadLetter(input: DeadLetterInput): Message {
  const headers = sanitizeHeaders(input.headers, (name) => DEAD_LETTER_HEADERS.test(name));
  const message = input.errorMessage.length > MAX_ERROR_MESSAGE_CHARS ? `${input.errorMessage.slice(0, MAX_ERROR_MESSAGE_CHARS - 1)}…` : input.errorMessage;
  Object.assign(headers, {
    [DLQ_HEADER.originalTopic]: input.topic,
    [DLQ_HEADER.originalPartition]: String(input.partition),
    [DLQ_HEADER.originalOffset]: input.offset,
    [DLQ_HEADER.errorCode]: input.errorCode,
    [DLQ_HEADER.errorMessage]: message,
    [DLQ_HEADER.attempts]: String(input.attempts),
    [DLQ_HEADER.consumer]: input.consumer,
    [DLQ_HEADER.firstDeadLetteredAt]: firstDeadLetteredAt(input),
  });
  return { key: input.key, value: input.value, headers };
}

/** The event's identity headers (and since when it is dead-lettered), kept in a reduced dead letter so it can still be found, released and horizon-checked. */
const IDENTITY_HEADERS = new Set<string>([HEADER.id, HEADER.eventType, HEADER.contentType, DLQ_HEADER.firstDeadLetteredAt]);

/**
 * When the DLQ refused a dead letter for good (too large, an invalid record), the same letter without
 * the original value and without the writer's headers: only key, identity and the x- headers, marked
 * with `x-dead-letter-reduced` and the refusal. The original record is still in its topic at
 * x-original-partition/offset (for as long as the topic keeps it).
 */
export function reduceDeadLetter(letter: Message, refusal: string): Message {
  const headers = sanitizeHeaders(letter.headers, (name) => !IDENTITY_HEADERS.has(name) && !DEAD_LETTER_HEADERS.test(name));
  headers[REDUCED_HEADER] = `value and headers dropped: ${refusal}`.slice(0, MAX_ERROR_MESSAGE_CHARS);
  return { key: letter.key, value: null, headers };
}

/**
 * Can sending this again succeed? kafkajs errors carry `retriable` (a broker or connection problem,
 * or retries exhausted on one: KafkaJSNumberOfRetriesExceeded); the deepest cause decides, as kafkajs
 * itself decides. A TypeError from encoding, MESSAGE_TOO_LARGE or INVALID_RECORD will fail the same
 * way every time; a missing ACL (TOPIC_AUTHORIZATION_FAILED, classified as KAFKA_ACL_DENIED) is waited
 * out, as an operator fixes it on the broker and no record should be reduced or the router stopped for it.
 */
export function isRetriableSendError(error: unknown): boolean {
  // A missing ACL or refused credential (router-deps.ts classifies it as KAFKA_ACL_DENIED / KAFKA_AUTH_FAILED): fixed on the broker, so waited out.
  if (isCredentialFailure(error) || credentialFailureKind(error, { hop: 'kafka' })) return true;
  if (isOutboxError(error)) return error.retriable;
  if ((error as Error | undefined)?.name === 'KafkaJSNumberOfRetriesExceeded') return true;
  let deepest = error as { cause?: unknown; retriable?: unknown } | undefined;
  while (deepest && typeof deepest === 'object' && deepest.cause && deepest.cause !== deepest) deepest = deepest.cause as typeof deepest;
  return deepest?.retriable === true;
}

/**
 * The third part of a record's way: its dead letter, then (policy permitting) its key parked so the
 * key's later events follow it. Resolves 'aborted' when the router stops while waiting for the DLQ or
 * the database. `spans`: the last try's handler span (`cause` its error), ended here with the dead
 * letter's outcome; without one (no handler ran) the record gets a span of its own.
 */
export async function deadLetterAndPark(
  where: Where,
  failure: Failure,
  eventId: string | undefined,
  deps: RouterDeps,
  scope: BatchScope,
  spans: HandlerSpans = HandlerSpans.withoutHandler(where, eventId, deps.consumer),
  cause?: unknown,
): Promise<Outcome> {
  let outcome: Outcome;
  try {
    outcome = await sendDeadLetter(where, failure, deps, scope);
  } catch (error) {
    spans.end('aborted', error);
    throw error;
  }
  if (outcome === 'dead-lettered') spans.end('dead-lettered', cause, { failure, topic: deps.dlqTopicFor(where.topic, where.aggregateType) });
  else spans.end('aborted', cause);
  if (outcome !== 'dead-lettered' || !scope.parked || where.key === '') return outcome;
  const id = eventId ?? `offset:${where.topic}/${where.partition}/${where.message.offset}`;
  for (let wait = 1; ; wait++) {
    try {
      await scope.parked.park(where.key, id, String(failure.code));
      return outcome;
    } catch (error) {
      // The dead letter is written; a redelivery would write it again (harmless: replay goes through the inbox).
      if (!(await waitForInfrastructure(error, wait, whereOf(where), deps, scope))) return 'aborted';
    }
  }
}

async function sendDeadLetter(where: Where, failure: Failure, deps: RouterDeps, scope: BatchScope): Promise<Outcome> {
  const { topic, partition, message } = where;
  const dlqTopic = deps.dlqTopicFor(topic, where.aggregateType);
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
    consumer: deps.consumer,
    timestamp: message.timestamp,
  });
  let reduced = false;
  // A record is never skipped without its dead letter: if the DLQ is unavailable, wait for it. Waiting
  // is only for what can come back (kafkajs says retriable); a refusal that will repeat is not waited on.
  for (let wait = 1; ; wait++) {
    try {
      await deps.sendDeadLetter(dlqTopic, letter, topic);
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
      const unavailable = isCredentialFailure(error) ? error : new OutboxError('DLQ_UNAVAILABLE', `Cannot write the dead letter to ${dlqTopic}: ${messageOf(error)}`, { retriable: true, cause: error });
      if (!(await waitForInfrastructure(unavailable, wait, { topic, partition, offset: message.offset }, deps, scope))) return 'aborted';
    }
  }
}
