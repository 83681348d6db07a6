/**
 * The limits an outbox row must keep so Debezium's Event Router and the polling relay can always turn it
 * into a Kafka record. A row outside them fails the connector task on that row, and the task never gets
 * past it. The writer checks them (EVENT_INVALID, PAYLOAD_TOO_LARGE); `db:provision` enforces the same
 * rules as named CHECK constraints (src/provision/outbox-limits.ts), so a row inserted by plain SQL is
 * refused at INSERT too, with SQLSTATE 23514 and the constraint's name. One home for both answers.
 */

import { DLQ_INFIX, EVENT_INFIX } from '../topics';

/** Kafka's topic name rule: letters, digits, `.`, `_` and `-`, at most 249 characters. */
export const KAFKA_TOPIC_MAX_LENGTH = 249;

/**
 * The routed topic is `outbox.event.<aggregate_type>` and the dead letters go to `outbox.dlq.<aggregate_type>`:
 * the longer prefix bounds the aggregate type. (A connector.topicReplacement with a longer prefix lowers
 * the real limit by its extra length.)
 */
export const MAX_AGGREGATE_TYPE_LENGTH = KAFKA_TOPIC_MAX_LENGTH - Math.max(EVENT_INFIX.length, DLQ_INFIX.length);

/** Same text in JavaScript and PostgreSQL (ARE) regular expression syntax. */
export const AGGREGATE_TYPE_PATTERN = `^[A-Za-z0-9._-]{1,${MAX_AGGREGATE_TYPE_LENGTH}}$`;

/** The hex digits of each dash-separated field of a W3C traceparent, version 00: version, trace id, parent id, flags. */
const TRACEPARENT_FIELDS = [2, 32, 16, 2] as const;

/** W3C trace context, version 00 form; lower-case hex as the specification requires. */
export const TRACEPARENT_PATTERN = `^${TRACEPARENT_FIELDS.map((n) => `[0-9a-f]{${n}}`).join('-')}$`;

/**
 * The same rules as SQL for the outbox's CHECK constraints, without bounded repetition. PostgreSQL's
 * regular expression engine runs `{1,236}` as 236 states for every row: with AGGREGATE_TYPE_PATTERN and
 * TRACEPARENT_PATTERN as they are, the two CHECKs cost 17 µs of the database's CPU per outbox INSERT, as
 * written here 2 µs (`npm run bench:limit-checks`, docs/bench.md). An unbounded class and a
 * length test accept and refuse exactly the same text (test/integration/provision.test.ts holds the
 * cases); `$` matches only at the end of the text in PostgreSQL, so a trailing newline is refused as in
 * JavaScript.
 */
export function aggregateTypeCheckSql(column: string): string {
  return `octet_length(${column}) BETWEEN 1 AND ${MAX_AGGREGATE_TYPE_LENGTH} AND ${column} ~ '^[A-Za-z0-9._-]+$'`;
}

/** See aggregateTypeCheckSql: hex fields between dashes, the whole length, and where the dashes are. NULL passes. */
export function traceparentCheckSql(column: string): string {
  const length = TRACEPARENT_FIELDS.reduce((a, n) => a + n, 0) + TRACEPARENT_FIELDS.length - 1;
  const dashes: number[] = [];
  TRACEPARENT_FIELDS.slice(0, -1).reduce((at, n) => (dashes.push(at + n), at + n + 1), 1);
  const fields = TRACEPARENT_FIELDS.map(() => '[0-9a-f]+').join('-');
  return [`octet_length(${column}) = ${length}`, `${column} ~ '^${fields}$'`, ...dashes.map((d) => `substr(${column}, ${d}, 1) = '-'`)].join(' AND ');
}

/** The Kafka key, in UTF-8 bytes. */
export const MAX_AGGREGATE_ID_BYTES = 4096;

/** The `headers` column (a JSON object of string values), in UTF-8 bytes. */
export const MAX_HEADERS_BYTES = 64 * 1024;

/**
 * The CHECK constraint of each limit. Constraint names are per table, so they are the same whatever the
 * outbox table is called; an INSERT error names one of them, and `explainLimitViolation` says what it means.
 */
export const OUTBOX_LIMIT_CONSTRAINTS = Object.freeze({
  payload: 'outbox_payload_size',
  headers: 'outbox_headers_size',
  traceparent: 'outbox_traceparent_format',
  aggregateId: 'outbox_aggregate_id_size',
  aggregateType: 'outbox_aggregate_type_topic',
});

/** What a violated limit constraint means, or undefined for any other constraint. */
export function explainLimitViolation(constraint: string | undefined, maxPayloadBytes: number): string | undefined {
  switch (constraint) {
    case OUTBOX_LIMIT_CONSTRAINTS.payload:
      return `payload must be at most ${maxPayloadBytes} bytes (outbox.maxPayloadBytes as of the last db:provision)`;
    case OUTBOX_LIMIT_CONSTRAINTS.headers:
      return `headers must be at most ${MAX_HEADERS_BYTES} bytes of JSON`;
    case OUTBOX_LIMIT_CONSTRAINTS.traceparent:
      return 'traceparent must be NULL or a W3C traceparent such as 00-<32 hex>-<16 hex>-01';
    case OUTBOX_LIMIT_CONSTRAINTS.aggregateId:
      return `aggregate_id must be 1 to ${MAX_AGGREGATE_ID_BYTES} bytes (it is the Kafka key)`;
    case OUTBOX_LIMIT_CONSTRAINTS.aggregateType:
      return `aggregate_type must be 1 to ${MAX_AGGREGATE_TYPE_LENGTH} letters, digits, ".", "_" or "-" (it becomes the topic outbox.event.<aggregate_type>)`;
    default:
      return undefined;
  }
}
