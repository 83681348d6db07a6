/** Error codes of the relay (src/relay); each has a row in docs/errors.md. */
export const RELAY_ERROR_CODES = [] as const;
