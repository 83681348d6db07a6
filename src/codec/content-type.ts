/** The two payload encodings of the outbox table's `content_type` column (docs/operations.md, "The outbox table, topics and headers"). */
export const AVRO_CONTENT_TYPE = 'application/vnd.apache.avro+binary';
export const JSON_CONTENT_TYPE = 'application/json';
export const CONTENT_TYPES = [AVRO_CONTENT_TYPE, JSON_CONTENT_TYPE] as const;
export type ContentType = (typeof CONTENT_TYPES)[number];

/**
 * Kafka headers and other producers may send `application/json; charset=utf-8` or upper case: both mean
 * the same encoding, so they are accepted. Anything else is undefined (the caller names the options).
 */
export function normalizeContentType(value: unknown): ContentType | undefined {
  if (typeof value !== 'string') return undefined;
  const bare = value.split(';')[0]?.trim().toLowerCase();
  return CONTENT_TYPES.find((t) => t === bare);
}
