export { createOutboxWriter, type OutboxWriter, type PreparedInsert, type Queryable, type OutboxWriterOptions, type PayloadEncoder, type WrittenEvent } from './writer';
export { CONTENT_TYPES, RESERVED_HEADERS, validateEvent, type ContentType, type OutboxEvent, type OutboxEventOf, type WriterEvent } from './event';
export { AGGREGATE_TYPE_PATTERN, MAX_AGGREGATE_ID_BYTES, MAX_AGGREGATE_TYPE_LENGTH, MAX_HEADERS_BYTES, OUTBOX_LIMIT_CONSTRAINTS, TRACEPARENT_PATTERN, explainLimitViolation } from './limits';
export { bindWriter, type ExecutorWriter, type OutboxExecutor, type TransactionState, type TransactionWriter } from './executor';
