/** Error codes of `outbox console` (src/console); each has a row in docs/errors.md. */
export const CONSOLE_ERROR_CODES = ['CONSOLE_AUTH_REQUIRED', 'CONSOLE_AUDIT_UNWRITABLE', 'CONSOLE_UNAUTHENTICATED', 'CONSOLE_FORBIDDEN', 'CONSOLE_BUSY', 'CONSOLE_REQUEST_INVALID'] as const;
