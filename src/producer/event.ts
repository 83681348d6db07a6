import { z } from 'zod';
import { CONTENT_TYPES, type ContentType } from '../codec/content-type';
import type { EventMapShape } from '../codec/generate-types';
import { RESERVED_HEADERS } from '../envelope';
import { OutboxError } from '../errors';
import { parse } from '../config/parse';
import { AGGREGATE_TYPE_PATTERN, MAX_AGGREGATE_ID_BYTES, MAX_AGGREGATE_TYPE_LENGTH, MAX_HEADERS_BYTES, TRACEPARENT_PATTERN } from './limits';

export { CONTENT_TYPES, type ContentType };

/** Header names the pipeline sets itself (the SMT sets `id`); user headers may not shadow them. */
export { RESERVED_HEADERS };

/** An event as the application hands it to writeEvent. */
export interface OutboxEvent<P = unknown> {
  /** UUID; generated when absent. It is the `id` header and the consumer's deduplication key. */
  id?: string;
  /** Routes the event: topic `outbox.event.<aggregateType>`. */
  aggregateType: string;
  /** The Kafka key: events of one aggregate stay in order. */
  aggregateId: string;
  /** The event type, e.g. OrderCreated; with Avro it names schemas/<aggregateType>/<type>.avsc. */
  type: string;
  payload: P;
  /** W3C trace context of the writing request, carried to the consumer. */
  traceparent?: string;
  headers?: Record<string, string>;
  contentType?: ContentType;
  /**
   * The payload's schema version, written as the `schemaVersion` entry of `headers`: a consumer with
   * `payloadSchemas` per version checks a JSON payload against that version (docs/schemas.md).
   */
  schemaVersion?: number | string;
}

/**
 * The events of an EventMap (`outbox schemas:types`): each an aggregate type and event type the map has,
 * with that pair's payload, so a misspelled type or a wrong payload does not compile.
 */
export type OutboxEventOf<M extends EventMapShape> = {
  [A in keyof M & string]: { [T in keyof M[A] & string]: Omit<OutboxEvent<M[A][T]>, 'aggregateType' | 'type'> & { aggregateType: A; type: T } }[keyof M[A] & string];
}[keyof M & string];

/** What a writer of map M takes: OutboxEvent for the untyped default, OutboxEventOf<M> for a generated map. */
export type WriterEvent<M extends EventMapShape> = string extends keyof M ? OutboxEvent : OutboxEventOf<M>;

const name = z.string().regex(/^[A-Za-z0-9._-]{1,200}$/, 'letters, digits, ".", "_" and "-" only (it becomes part of a topic or file name)');

const eventSchema = z
  .object({
    id: z.uuid().optional(),
    // The same limits as the outbox table's CHECK constraints (./limits.ts): both give the same answer.
    aggregateType: z
      .string()
      .regex(new RegExp(AGGREGATE_TYPE_PATTERN), `1 to ${MAX_AGGREGATE_TYPE_LENGTH} characters, letters, digits, ".", "_" and "-" only (it becomes the Kafka topic outbox.event.<aggregateType>, at most 249 characters)`),
    aggregateId: z
      .string()
      .min(1)
      .refine((id) => Buffer.byteLength(id) <= MAX_AGGREGATE_ID_BYTES, `at most ${MAX_AGGREGATE_ID_BYTES} bytes in UTF-8 (it is the Kafka key)`),
    type: name,
    payload: z.unknown(),
    traceparent: z
      .string()
      .regex(new RegExp(TRACEPARENT_PATTERN), 'a W3C traceparent such as 00-<32 hex>-<16 hex>-01')
      .optional(),
    headers: z
      .record(z.string().min(1), z.string())
      .refine((h) => !Object.keys(h).some((k) => RESERVED_HEADERS.includes(k)), `must not use the reserved names ${RESERVED_HEADERS.join(', ')}`)
      .refine((h) => Buffer.byteLength(JSON.stringify(h)) <= MAX_HEADERS_BYTES, `at most ${MAX_HEADERS_BYTES} bytes as JSON (the outbox's headers column)`)
      .optional(),
    contentType: z.enum(CONTENT_TYPES).optional(),
    schemaVersion: z.union([z.number().int().min(1), z.string().regex(/^[A-Za-z0-9._-]{1,50}$/, 'a version such as 2 or "2"')]).optional(),
  })
  .strict();

const EVENT_KEYS = new Set(Object.keys(eventSchema.shape));
const TRACEPARENT = new RegExp(TRACEPARENT_PATTERN);
const AGGREGATE_TYPE = new RegExp(AGGREGATE_TYPE_PATTERN);
const NAME = /^[A-Za-z0-9._-]{1,200}$/;
/** Aggregate type / event type pairs already found valid: each pair's regular expressions run once per process. */
const knownTypes = new Set<string>();
const KNOWN_TYPES_MAX = 10_000;

/**
 * The common event (no id, no headers) checked without building a zod result: the writer's hot path.
 * True only when zod would accept the event too; anything else (an id, headers, a bad field) goes through
 * the schema, which also writes the error message.
 */
function plainEventIsValid(event: OutboxEvent): boolean {
  if (event === null || typeof event !== 'object' || event.id !== undefined || event.headers !== undefined || event.schemaVersion !== undefined) return false;
  for (const key in event) if (!EVENT_KEYS.has(key)) return false;
  const { aggregateType, type, aggregateId, traceparent, contentType } = event;
  if (typeof aggregateType !== 'string' || typeof type !== 'string' || typeof aggregateId !== 'string') return false;
  if (aggregateId.length === 0 || (aggregateId.length * 3 > MAX_AGGREGATE_ID_BYTES && Buffer.byteLength(aggregateId) > MAX_AGGREGATE_ID_BYTES)) return false;
  if (traceparent !== undefined && (typeof traceparent !== 'string' || !TRACEPARENT.test(traceparent))) return false;
  if (contentType !== undefined && !CONTENT_TYPES.includes(contentType)) return false;
  const pair = `${aggregateType}\u0000${type}`;
  if (knownTypes.has(pair)) return true;
  if (!AGGREGATE_TYPE.test(aggregateType) || !NAME.test(type)) return false;
  if (knownTypes.size < KNOWN_TYPES_MAX) knownTypes.add(pair);
  return true;
}

/** Checks an event's envelope (not its payload: the codec does that against the schema). */
export function validateEvent(event: OutboxEvent, index?: number): void {
  if (plainEventIsValid(event)) {
    if (event.payload === undefined) throw invalid(['  - payload: is missing'], index);
    return;
  }
  parse(eventSchema, event, {
    heading: `Invalid outbox event${index === undefined ? '' : ` #${index}`}; nothing was written`,
    code: 'EVENT_INVALID',
    root: '(event)',
    // Never echo the payload: it is business data.
    hideValues: (path) => path === 'payload' || path.startsWith('payload.'),
  });
  if (event.payload === undefined) throw invalid(['  - payload: is missing'], index);
}

function invalid(lines: string[], index?: number): OutboxError {
  return new OutboxError('EVENT_INVALID', `Invalid outbox event${index === undefined ? '' : ` #${index}`}; nothing was written:\n${lines.join('\n')}`);
}
