/** Error codes of the watchdog (src/watchdog); each has a row in docs/errors.md. */
export const WATCHDOG_ERROR_CODES = [
  /** The slot query (or the settings query) failed: permission, statement timeout, lost connection. */
  'WATCHDOG_QUERY_FAILED',
  /** A receiver (webhook, Slack, Alertmanager) refused a notification or stayed unreachable through every retry. */
  'WATCHDOG_DELIVERY_FAILED',
] as const;
