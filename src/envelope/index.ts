/**
 * The record envelope, in one place (docs/operations.md, "The outbox table, topics and headers"): the
 * outbox table's event columns, the headers the Event Router makes of them (connect/outbox-connector.json,
 * `table.fields.additional.placement`; a unit test keeps the template and these names equal), the
 * record the polling relay builds from a row, the parsing the router does, and the headers a dead
 * letter or a replay adds. Types only from kafkajs: the writer may use this module.
 */
import type { IHeaders } from 'kafkajs';
import { OutboxError } from '../errors';
import { DEFAULT_ENVELOPE, type EnvelopeSettings } from './value-format';

export { DEFAULT_ENVELOPE, VALUE_FORMATS, decodeValue, splitEnvelopePlacement, type EnvelopeSettings, type ValueCodec, type ValueFormat } from './value-format';

/** Header names of every routed record. */
export const HEADER = {
  /** The outbox row's uuid id (the Event Router's `table.field.event.id`). */
  id: 'id',
  eventType: 'eventType',
  contentType: 'contentType',
  traceparent: 'traceparent',
  /** The writer's extra headers: a JSON object of string values, or null. */
  headers: 'headers',
} as const;

/** Names an event's own `headers` may not use: the envelope's. */
export const RESERVED_HEADERS: readonly string[] = Object.values(HEADER);

/**
 * The entry of an event's own `headers` (the JSON column) naming its payload's schema version: set by
 * writeEvent's `schemaVersion`, read by the router's per-version `payloadSchemas`.
 */
export const SCHEMA_VERSION_HEADER = 'schemaVersion';

/** The headers a dead letter adds to the original record's. */
export const DLQ_HEADER = {
  originalTopic: 'x-original-topic',
  originalPartition: 'x-original-partition',
  originalOffset: 'x-original-offset',
  errorCode: 'x-error-code',
  errorMessage: 'x-error-message',
  attempts: 'x-attempts',
  /** Set on a dead letter whose original value and headers the DLQ refused: only the event's identity is kept. */
  reduced: 'x-dead-letter-reduced',
  /** Set by `dlq:replay` on a re-published record. */
  replayedAt: 'x-replayed-at',
  /** The router consumer that dead-lettered the record: a DLQ topic is shared by every consumer of its aggregate type. */
  consumer: 'x-consumer',
  /** Set by `dlq:replay` on a re-published record: the one consumer it is for; every other router skips it. */
  replayConsumer: 'x-replay-consumer',
  /**
   * When the event was first dead-lettered (epoch ms), or its record written if that was earlier: kept
   * when the event is dead-lettered again (replays carry it), so `dlq:replay --all`'s horizon counts
   * from it, not from the newest letter's timestamp.
   */
  firstDeadLetteredAt: 'x-first-dead-lettered-at',
} as const;

/**
 * The headers a dead letter adds; dropped when a dead letter is replayed or dead-lettered again (and
 * written anew). Not x-first-dead-lettered-at: it rides the replay and is kept by the next dead letter.
 */
export const DEAD_LETTER_HEADERS = /^x-(original-|error-|attempts$|replayed-at$|dead-letter-reduced$|consumer$|replay-consumer$)/;

/** The outbox table's event columns, in the writer's INSERT order. */
export const OUTBOX_COLUMNS = ['id', 'aggregate_type', 'aggregate_id', 'event_type', 'payload', 'content_type', 'traceparent', 'headers'] as const;

/** What the Event Router reads from which column (the connector template's `table.field.*` and `route.by.field`). */
export const EVENT_ROUTER_FIELDS = { id: 'id', key: 'aggregate_id', payload: 'payload', routeBy: 'aggregate_type' } as const;

/** Column → header, in the Event Router's configured order: `table.fields.additional.placement`. */
export const ADDITIONAL_PLACEMENT: ReadonlyArray<readonly [column: string, header: string]> = [
  ['event_type', HEADER.eventType],
  ['content_type', HEADER.contentType],
  ['traceparent', HEADER.traceparent],
  ['headers', HEADER.headers],
];

/** `event_type:header:eventType,…`: the template's value, derived. */
export function additionalPlacement(): string {
  return ADDITIONAL_PLACEMENT.map(([column, header]) => `${column}:header:${header}`).join(',');
}

/** One outbox row's event columns, as node-postgres returns them. */
export interface OutboxEventRow {
  id: string;
  aggregate_type: string;
  aggregate_id: string;
  event_type: string;
  payload: Buffer;
  content_type: string;
  traceparent: string | null;
  headers: string | null;
}

/** The Kafka record of a row: key, value and headers (the topic is the caller's, src/topics). */
export interface EnvelopeRecord {
  key: string;
  value: Buffer;
  headers: IHeaders;
}

/**
 * The record the Debezium Outbox Event Router makes of a row: key = aggregate_id (StringConverter),
 * value = the payload bytes unchanged (BinaryDataConverter), header `id` = the row id, then the
 * additional placements in their configured order.
 *
 * The one difference: for a NULL traceparent or headers column the SMT emits the header with a null
 * value; kafkajs 2.2.4 cannot encode a null header value (its record encoder calls Buffer.byteLength on
 * it and throws), so such a header is left out. Readers see the same thing either way: kafkajs and the
 * Java client return null/undefined for both, and the router treats both as "not set".
 */
export function envelopeOf(row: OutboxEventRow): EnvelopeRecord {
  return {
    key: row.aggregate_id,
    value: row.payload,
    headers: {
      [HEADER.id]: row.id,
      [HEADER.eventType]: row.event_type,
      [HEADER.contentType]: row.content_type,
      ...(row.traceparent === null ? {} : { [HEADER.traceparent]: row.traceparent }),
      ...(row.headers === null ? {} : { [HEADER.headers]: row.headers }),
    },
  };
}

/** The headers of one record, checked. */
export interface RecordHeaders {
  id: string;
  eventType: string;
  contentType: string;
  traceparent?: string;
  /** The writer's extra headers (the `headers` header, a JSON object of strings); `{}` when absent or null. */
  extra: Record<string, string>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** One header as text: kafkajs gives Buffers (or arrays of them when a name repeats; the first wins). */
export function headerText(headers: IHeaders | undefined, name: string): string | undefined {
  const raw = headers?.[name];
  const first = Array.isArray(raw) ? raw[0] : raw;
  if (first === undefined || first === null) return undefined;
  return Buffer.isBuffer(first) ? first.toString('utf8') : String(first);
}

function invalid(message: string, details: Record<string, unknown>): OutboxError {
  return new OutboxError('RECORD_INVALID', message, { details });
}

/**
 * An envelope header as text. A name that repeats (kafkajs then gives an array) is accepted only when
 * every value is the same: with two different `id`s (or event types, …) no reading of the record is the
 * right one, and taking the first would apply it under an identity the producer may not have meant.
 */
function envelopeHeader(headers: IHeaders | undefined, name: string): string | undefined {
  const raw = headers?.[name];
  if (Array.isArray(raw) && raw.length > 1) {
    const values = raw.map((v) => (v === undefined || v === null ? null : Buffer.isBuffer(v) ? v.toString('utf8') : String(v)));
    if (values.some((v) => v !== values[0])) {
      throw invalid(
        `The record carries the ${name} header ${values.length} times with different values (${values.map((v) => JSON.stringify(v === null ? null : v.slice(0, 100))).join(', ')}); ` +
          'the envelope headers (id, eventType, contentType, headers) appear once. Check the producer that added the second one.',
        { header: name, count: values.length },
      );
    }
  }
  return headerText(headers, name);
}

/**
 * The exception: traceparent. A tracing agent on the Connect worker (OpenTelemetry's Java agent
 * instruments the Kafka producer) adds a traceparent of its own after the Event Router's, null or not:
 * refusing would dead-letter every event of such a pipeline. The first non-empty value is the Event
 * Router's (the writer's trace) when it has one.
 */
function firstTraceparent(headers: IHeaders | undefined): string | undefined {
  const raw = headers?.[HEADER.traceparent];
  const values = (Array.isArray(raw) ? raw : [raw]).map((v) => (v === undefined || v === null ? '' : Buffer.isBuffer(v) ? v.toString('utf8') : String(v)));
  return values.find((v) => v !== '') || undefined;
}

/** The headers of one record as `router.envelope` reads them: no event type with `eventTypeField`, no content type unless `bytes` needs it. */
export interface EnvelopeHeaders {
  id: string;
  eventType?: string;
  contentType?: string;
  traceparent?: string;
  extra: Record<string, string>;
}

/** The longest event id the inbox takes: a key, not a document (the inbox's primary key holds it). */
export const MAX_EVENT_ID_LENGTH = 200;

/** Is this id a UUID (any case)? Such ids are lower-cased, so one event has one inbox key. */
export function isUuid(id: string): boolean {
  return UUID.test(id);
}

/**
 * Throws RECORD_INVALID (dead-letter at once: a redelivery carries the same headers) naming what is wrong.
 * An id is any text up to MAX_EVENT_ID_LENGTH characters (a bigint or text id of a Debezium outbox is
 * kept exactly as written); a UUID is lower-cased.
 */
export function parseEnvelopeHeaders(headers: IHeaders | undefined, envelope: Readonly<EnvelopeSettings> = DEFAULT_ENVELOPE): EnvelopeHeaders {
  const id = envelopeHeader(headers, envelope.idHeader);
  const fromField = envelope.eventTypeField !== undefined;
  const eventType = fromField ? undefined : envelopeHeader(headers, envelope.eventTypeHeader);
  const contentType = envelopeHeader(headers, HEADER.contentType) || (envelope.valueFormat === 'bytes' ? envelope.defaultContentType : undefined);
  const missing = [
    id ? undefined : envelope.idHeader,
    fromField || eventType ? undefined : envelope.eventTypeHeader,
    contentType || envelope.valueFormat !== 'bytes' ? undefined : HEADER.contentType,
  ].filter(Boolean);
  if (missing.length > 0) {
    const fix =
      missing.includes(HEADER.contentType) && missing.length === 1
        ? ' A Debezium outbox without a contentType column: set router.envelope.defaultContentType (docs/adopting-debezium-outbox.md).'
        : ` The router reads the id from header ${JSON.stringify(envelope.idHeader)} and the event type from ${fromField ? `value field ${JSON.stringify(envelope.eventTypeField)}` : `header ${JSON.stringify(envelope.eventTypeHeader)}`} (router.envelope).`;
    throw invalid(`The record lacks the header(s) ${missing.join(', ')}; the Event Router sets id, eventType and contentType on every record.${fix}`, { missing });
  }
  if ((id as string).length > MAX_EVENT_ID_LENGTH) {
    throw invalid(`The record's ${envelope.idHeader} header is ${(id as string).length} characters long (${JSON.stringify((id as string).slice(0, 60))}…); an event id is at most ${MAX_EVENT_ID_LENGTH}.`, {
      idLength: (id as string).length,
    });
  }
  return {
    id: UUID.test(id as string) ? (id as string).toLowerCase() : (id as string),
    ...(eventType === undefined ? {} : { eventType }),
    ...(contentType === undefined ? {} : { contentType }),
    traceparent: firstTraceparent(headers),
    extra: parseExtraHeaders(envelopeHeader(headers, HEADER.headers)),
  };
}

/** This project's own records (the default envelope): id, eventType and contentType are all headers. */
export function parseRecordHeaders(headers: IHeaders | undefined): RecordHeaders {
  return parseEnvelopeHeaders(headers) as RecordHeaders;
}

/** The `headers` header: null/absent/empty → `{}`; anything but a JSON object of strings → RECORD_INVALID. */
export function parseExtraHeaders(text: string | undefined): Record<string, string> {
  if (text === undefined || text === '' || text === 'null') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalid(`The record's headers header is not JSON: ${JSON.stringify(text.slice(0, 200))}. It must be a JSON object of string values, or null.`, {});
  }
  if (parsed === null) return {};
  if (typeof parsed !== 'object' || Array.isArray(parsed) || Object.values(parsed).some((v) => typeof v !== 'string')) {
    throw invalid(`The record's headers header ${JSON.stringify(text.slice(0, 200))} is not a JSON object of string values.`, {});
  }
  return { ...(parsed as Record<string, string>) };
}
