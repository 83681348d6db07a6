/**
 * How the router reads a record whose producer is not this project's connector template: a stock
 * Debezium Outbox Event Router, configured the way Debezium documents it (docs/adopting-debezium-outbox.md).
 * The router does not guess the converter: `router.envelope.valueFormat` names it, per consumer. Only
 * the one place below sniffs, where it is unambiguous: a JSON string where the payload column's text is
 * expected (Debezium's `io.debezium.data.Json` without `table.expand.json.payload`, or a varchar column).
 * Types only from kafkajs, like index.ts.
 */
import { OutboxError } from '../errors';

/**
 * The value converter the connector runs, as the router reads it:
 * - `bytes`: BinaryDataConverter or ByteArrayConverter with a bytea payload column (this project's
 *   template); the `contentType` header (or `defaultContentType`) says JSON or Avro.
 * - `json`: JsonConverter with `schemas.enable=false`, or BinaryDataConverter with a JSON delegate on a
 *   jsonb/varchar column: a JSON object (with `table.expand.json.payload`) or a JSON string holding it.
 * - `json-with-schema`: JsonConverter with `schemas.enable=true`: `{ schema, payload }`, payload as above.
 * - `string`: StringConverter: the value is the payload column's JSON text.
 * - `avro`: an Avro converter through a registry (Confluent wire format: magic byte 0, 4-byte schema id).
 */
export const VALUE_FORMATS = ['bytes', 'json', 'json-with-schema', 'string', 'avro'] as const;
export type ValueFormat = (typeof VALUE_FORMATS)[number];

/** `router.envelope`, resolved (defaults in src/config/router-schema.ts). */
export interface EnvelopeSettings {
  /** The header carrying the event id (the Event Router's `table.field.event.id` lands in header `id`). */
  idHeader: string;
  /** The header carrying the event type (`table.fields.additional.placement=type:header:eventType`). */
  eventTypeHeader: string;
  /**
   * Instead of a header: the value field carrying the event type, Debezium's `type:envelope:<field>`
   * placement, which makes the value `{ payload, <field> }`. Not with `bytes` (the value is the payload).
   */
  eventTypeField?: string;
  /** The content type of a `bytes` record without a `contentType` header; unset: such a record is refused. */
  defaultContentType?: string;
  valueFormat: ValueFormat;
}

export const DEFAULT_ENVELOPE: Readonly<EnvelopeSettings> = Object.freeze({ idHeader: 'id', eventTypeHeader: 'eventType', valueFormat: 'bytes' });

/** What the router's codec does for the `bytes` and `avro` formats. */
export interface ValueCodec {
  decode(bytes: Buffer, contentType: string, options?: { reader?: { aggregateType: string; eventType: string } }): Promise<unknown>;
}

const AVRO = 'application/vnd.apache.avro+binary';

function failed(message: string, details: Record<string, unknown> = {}): OutboxError {
  return new OutboxError('DECODE_FAILED', message, { details: { reason: 'value-format', ...details } });
}

function parseJson(text: string, what: string, format: ValueFormat): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    const preview = text.length > 60 ? `${text.slice(0, 60)}…` : text;
    throw failed(
      `Cannot decode the record value as ${what} (router.envelope.valueFormat ${format}): ${(error as Error).message}. It starts with ${JSON.stringify(preview)}; ` +
        'check that valueFormat names the connector\'s value converter (docs/adopting-debezium-outbox.md).',
      { format },
    );
  }
}

function utf8(bytes: Buffer, format: ValueFormat): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw failed(`The record value is not UTF-8 text, but router.envelope.valueFormat is ${format}. Is the connector's value converter another one (Avro, bytes)?`, { format });
  }
}

/**
 * The payload column's text, parsed: Debezium gives a jsonb column without `table.expand.json.payload`
 * (and any varchar column) as a string. Unambiguous here: an outbox payload is a JSON document, and the
 * converter gives the column as a string only when it was not expanded into a structure.
 */
function columnValue(value: unknown, format: ValueFormat): unknown {
  return typeof value === 'string' ? parseJson(value, 'the payload column\'s JSON text', format) : value;
}

/** A JsonConverter `{ schema, payload }` envelope's payload; a `bytes` schema carries the column base64-encoded. */
function withoutSchema(value: unknown, format: ValueFormat): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || !('schema' in value) || !('payload' in value)) {
    throw failed(
      'The record value is not a JsonConverter envelope { "schema": …, "payload": … }, but router.envelope.valueFormat is json-with-schema. ' +
        'If the connector sets value.converter.schemas.enable=false, use valueFormat json.',
      { format },
    );
  }
  const { schema, payload } = value as { schema: { type?: unknown } | null; payload: unknown };
  if (schema?.type === 'bytes' && typeof payload === 'string') return parseJson(utf8(Buffer.from(payload, 'base64'), format), 'the payload column\'s JSON bytes', format);
  return payload;
}

/** Debezium's `type:envelope:<field>` placement: `{ payload, <field> }`; the event type and the payload apart. */
export function splitEnvelopePlacement(value: unknown, field: string): { eventType: string; payload: unknown } {
  const record = value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  const eventType = record?.[field];
  if (!record || typeof eventType !== 'string' || eventType === '' || !('payload' in record)) {
    throw new OutboxError(
      'RECORD_INVALID',
      `The record value has no event type field ${JSON.stringify(field)} beside "payload" (router.envelope.eventTypeField). ` +
        `The Event Router makes that shape with table.fields.additional.placement=<type column>:envelope:${field}; with :header: placement, unset eventTypeField.`,
      { details: { field } },
    );
  }
  return { eventType, payload: record.payload };
}

/**
 * The record value as the outbox payload, read per `valueFormat`, and with `eventTypeField` the event
 * type beside it. `contentType`: the header's or the default, needed only by `bytes`.
 */
export async function decodeValue(
  bytes: Buffer,
  settings: Pick<EnvelopeSettings, 'valueFormat' | 'eventTypeField'>,
  contentType: string | undefined,
  codec: ValueCodec,
  reader?: { aggregateType: string; eventType: string },
): Promise<{ payload: unknown; eventType?: string }> {
  const format = settings.valueFormat;
  let value: unknown;
  switch (format) {
    case 'bytes':
      if (contentType === undefined) throw new OutboxError('RECORD_INVALID', 'The record lacks the contentType header, and router.envelope.defaultContentType is unset.', { details: { missing: ['contentType'] } });
      return { payload: await codec.decode(bytes, contentType, reader ? { reader } : undefined) };
    case 'string':
      return { payload: parseJson(utf8(bytes, format), 'the payload column\'s JSON text', format) };
    case 'json':
      value = parseJson(utf8(bytes, format), 'JSON', format);
      break;
    case 'json-with-schema':
      value = withoutSchema(parseJson(utf8(bytes, format), 'JSON', format), format);
      break;
    case 'avro':
      value = await codec.decode(bytes, AVRO);
      if (Buffer.isBuffer(value)) value = parseJson(utf8(value, format), 'the payload column\'s JSON bytes', format);
      break;
  }
  if (settings.eventTypeField === undefined) return { payload: columnValue(value, format) };
  const split = splitEnvelopePlacement(value, settings.eventTypeField);
  return { payload: columnValue(split.payload, format), eventType: split.eventType };
}
