/** Error codes of the relay (src/relay); each has a row in docs/errors.md. */
export const RELAY_ERROR_CODES = ['RELAY_TABLE_INVALID', 'RELAY_WORKERS_MISMATCH', 'RELAY_KAFKA_UNAVAILABLE', 'RELAY_PUBLISH_FAILED'] as const;
