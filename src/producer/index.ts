export { createOutboxWriter, type OutboxWriter, type PreparedInsert, type OutboxWriterOptions, type PayloadEncoder, type WrittenEvent } from './writer';
export { CONTENT_TYPES, RESERVED_HEADERS, validateEvent, type ContentType, type OutboxEvent } from './event';
