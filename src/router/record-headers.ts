import type { IHeaders } from 'kafkajs';
import { OutboxError } from '../errors';

/** The Event Router's headers of one record, checked (docs/operations.md, "The outbox table, topics and headers"). */
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

/** Throws RECORD_INVALID (dead-letter at once: a redelivery carries the same headers) naming what is wrong. */
export function parseRecordHeaders(headers: IHeaders | undefined): RecordHeaders {
  const id = headerText(headers, 'id');
  const eventType = headerText(headers, 'eventType');
  const contentType = headerText(headers, 'contentType');
  const missing = [id ? undefined : 'id', eventType ? undefined : 'eventType', contentType ? undefined : 'contentType'].filter(Boolean);
  if (missing.length > 0) {
    throw invalid(`The record lacks the header(s) ${missing.join(', ')}; the Event Router sets id, eventType and contentType on every record.`, { missing });
  }
  if (!UUID.test(id as string)) {
    throw invalid(`The record's id header ${JSON.stringify(id)} is not a UUID; the inbox keys applied events by the outbox row's uuid id.`, { id });
  }
  return {
    id: (id as string).toLowerCase(),
    eventType: eventType as string,
    contentType: contentType as string,
    traceparent: headerText(headers, 'traceparent') || undefined,
    extra: parseExtraHeaders(headerText(headers, 'headers')),
  };
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
