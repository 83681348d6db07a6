/** Error codes of the watchdog (src/watchdog); each has a row in docs/errors.md. */
export const WATCHDOG_ERROR_CODES = [] as const;
