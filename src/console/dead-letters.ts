import type { IHeaders } from 'kafkajs';
import type { Pool } from 'pg';
import type { Codec } from '../codec';
import { inboxIdType } from '../db';
import { DLQ_HEADER, HEADER } from '../envelope';
import type { CachedLetter } from './dlq-cache';
import { hasRules, maskValue, MASKED, type MaskRules } from './mask';

/** Where a dead letter's event stands for the consumer that dead-lettered it. */
export type LetterState = 'parked' | 'applied' | 'not-parked';

/** A dead letter as the page and the API show it: every value is data, rendered as text. */
export interface LetterView {
  /** `topic/partition/offset`: names the letter in the API. */
  ref: string;
  topic: string;
  partition: number;
  offset: string;
  writtenAt: string;
  key: string | null;
  id: string | null;
  eventType: string | null;
  contentType: string | null;
  consumer: string | null;
  errorCode: string | null;
  errorMessage: string | null;
  attempts: number | null;
  original: { topic: string | null; partition: string | null; offset: string | null };
  firstDeadLetteredAt: string | null;
  /** Set when the DLQ refused the original value (x-dead-letter-reduced): not replayable. */
  reduced: string | null;
  /** parked: still outstanding (a replay applies it); applied: the consumer's inbox has it; not-parked: released, or its key was not parked. */
  state: LetterState;
  /** Every header as text (binary values as hex), the writer's `headers` object masked by the rules. */
  headers: Record<string, string>;
  payload: PayloadView;
}

export interface PayloadView {
  bytes: number;
  /** The decoded payload, masked; null when there is none or it could not be decoded. */
  decoded: unknown;
  format: 'avro' | 'json' | null;
  schema: string | null;
  /** Why it could not be decoded. */
  error: string | null;
  /** How many fields were masked. */
  masked: number;
  /** The first bytes as text, only for a payload that could not be decoded and only when no field is marked sensitive. */
  preview: string | null;
}

export interface LetterFilter {
  consumer?: string;
  key?: string;
  eventType?: string;
  errorCode?: string;
  /** Epoch ms, inclusive. */
  since?: number;
  until?: number;
  /** `outstanding` (default): the newest letter of each event still parked; `all`: every letter. */
  state?: 'outstanding' | 'all';
}

const PREVIEW_BYTES = 512;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A header value as text: UTF-8 when it is, else `hex:…` (a header is bytes; the page never guesses further). */
export function headerValue(raw: IHeaders[string]): string {
  const first = Array.isArray(raw) ? raw[0] : raw;
  if (first === undefined || first === null) return '';
  if (!Buffer.isBuffer(first)) return String(first);
  const text = first.toString('utf8');
  return Buffer.from(text, 'utf8').equals(first) ? text : `hex:${first.toString('hex')}`;
}

const header = (letter: CachedLetter, name: string): string | null => {
  const raw = letter.headers[name];
  return raw === undefined || raw === null ? null : headerValue(raw);
};

/** The writer's own headers (a JSON object of strings) with sensitive keys masked; unparseable text is masked whole when there are rules. */
function maskedWriterHeaders(text: string, rules: MaskRules): string {
  if (!hasRules(rules)) return text;
  try {
    const parsed: unknown = JSON.parse(text);
    return JSON.stringify(maskValue(parsed, rules).value);
  } catch {
    return MASKED;
  }
}

/** JSON can hold what a payload decodes to: Dates as ISO text, bytes as hex, bigints as text. */
function plain(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString();
  if (Buffer.isBuffer(value)) return `hex:${value.toString('hex')}`;
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return value.map(plain);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  return value;
}

export async function decodePayload(letter: CachedLetter, codec: Codec, rules: MaskRules): Promise<PayloadView> {
  const value = letter.value;
  const contentType = header(letter, HEADER.contentType);
  const view: PayloadView = { bytes: value?.length ?? 0, decoded: null, format: null, schema: null, error: null, masked: 0, preview: null };
  if (!value || value.length === 0) return { ...view, error: value ? 'empty payload' : 'no payload (a reduced dead letter keeps none)' };
  try {
    const decoded = await codec.decodeWithInfo(value, contentType ?? '');
    const masked = maskValue(plain(decoded.payload), rules);
    return { ...view, decoded: masked.value, masked: masked.masked, format: decoded.contentType.includes('avro') ? 'avro' : 'json', schema: decoded.schemaName ?? null };
  } catch (error) {
    const message = (error as Error).message ?? String(error);
    return { ...view, error: message, preview: hasRules(rules) ? null : value.subarray(0, PREVIEW_BYTES).toString('utf8') };
  }
}

/** The parked rows and inbox rows (tables schema-qualified) of these letters' events: which are still outstanding, which applied. */
export async function letterStates(pool: Pool, tables: { inbox: string; parked: string }, letters: readonly CachedLetter[]): Promise<Map<CachedLetter, LetterState>> {
  const raw = letters.map((l) => header(l, HEADER.id)).filter((id): id is string => Boolean(id));
  const ids = [...new Set(raw.map((id) => id.toLowerCase()))];
  const parked = new Set<string>();
  const applied = new Set<string>();
  if (ids.length > 0) {
    const [p, a] = await Promise.all([
      pool.query<{ consumer: string; event_id: string }>(`SELECT consumer, lower(event_id) AS event_id FROM ${tables.parked} WHERE lower(event_id) = ANY($1::text[])`, [ids]),
      // The array is typed by the column (uuid, or text after migration 013); a text id keeps its case there.
      inboxIdType(pool, tables.inbox).then((type) =>
        pool.query<{ consumer: string; message_id: string }>(`SELECT consumer, lower(message_id::text) AS message_id FROM ${tables.inbox} WHERE message_id = ANY($1)`, [
          type === 'uuid' ? ids.filter((id) => UUID.test(id)) : [...new Set([...raw, ...ids])],
        ]),
      ),
    ]);
    for (const r of p.rows) parked.add(`${r.consumer}\u0000${r.event_id}`);
    for (const r of a.rows) applied.add(`${r.consumer}\u0000${r.message_id}`);
  }
  const states = new Map<CachedLetter, LetterState>();
  for (const letter of letters) {
    const id = header(letter, HEADER.id)?.toLowerCase();
    const consumer = header(letter, DLQ_HEADER.consumer);
    const match = (set: Set<string>) => id !== undefined && [...set].some((k) => k.endsWith(`\u0000${id}`) && (consumer === null || k.startsWith(`${consumer}\u0000`)));
    states.set(letter, match(parked) ? 'parked' : match(applied) ? 'applied' : 'not-parked');
  }
  return states;
}

/** The letters the filter keeps, newest first; `outstanding` keeps the newest letter of each parked event. */
export function filterLetters(letters: readonly CachedLetter[], states: ReadonlyMap<CachedLetter, LetterState>, filter: LetterFilter): CachedLetter[] {
  const seen = new Set<string>();
  const out: CachedLetter[] = [];
  for (const letter of [...letters].sort((a, b) => b.timestamp - a.timestamp)) {
    if (filter.consumer && header(letter, DLQ_HEADER.consumer) !== filter.consumer) continue;
    if (filter.key !== undefined && filter.key !== '' && letter.key !== filter.key) continue;
    if (filter.eventType && header(letter, HEADER.eventType) !== filter.eventType) continue;
    if (filter.errorCode && header(letter, DLQ_HEADER.errorCode) !== filter.errorCode) continue;
    if (filter.since !== undefined && letter.timestamp < filter.since) continue;
    if (filter.until !== undefined && letter.timestamp > filter.until) continue;
    if ((filter.state ?? 'outstanding') === 'outstanding') {
      if (states.get(letter) !== 'parked') continue;
      const event = `${header(letter, DLQ_HEADER.consumer) ?? ''}\u0000${header(letter, HEADER.id) ?? `${letter.topic}/${letter.partition}/${letter.offset}`}`;
      if (seen.has(event)) continue;
      seen.add(event);
    }
    out.push(letter);
  }
  return out;
}

export function letterView(letter: CachedLetter, state: LetterState, payload: PayloadView, rules: MaskRules): LetterView {
  const headers: Record<string, string> = {};
  for (const [name, raw] of Object.entries(letter.headers)) {
    if (raw === undefined || raw === null) continue;
    const text = headerValue(raw);
    headers[name] = name === HEADER.headers ? maskedWriterHeaders(text, rules) : text;
  }
  const attempts = Number(header(letter, DLQ_HEADER.attempts));
  const first = Number(header(letter, DLQ_HEADER.firstDeadLetteredAt));
  return {
    ref: `${letter.topic}/${letter.partition}/${letter.offset}`,
    topic: letter.topic,
    partition: letter.partition,
    offset: letter.offset,
    writtenAt: new Date(letter.timestamp).toISOString(),
    key: letter.key,
    id: header(letter, HEADER.id),
    eventType: header(letter, HEADER.eventType),
    contentType: header(letter, HEADER.contentType),
    consumer: header(letter, DLQ_HEADER.consumer),
    errorCode: header(letter, DLQ_HEADER.errorCode),
    errorMessage: header(letter, DLQ_HEADER.errorMessage),
    attempts: Number.isFinite(attempts) && header(letter, DLQ_HEADER.attempts) !== null ? attempts : null,
    original: { topic: header(letter, DLQ_HEADER.originalTopic), partition: header(letter, DLQ_HEADER.originalPartition), offset: header(letter, DLQ_HEADER.originalOffset) },
    firstDeadLetteredAt: Number.isSafeInteger(first) && first > 0 ? new Date(first).toISOString() : null,
    reduced: header(letter, DLQ_HEADER.reduced),
    state,
    headers,
    payload,
  };
}
