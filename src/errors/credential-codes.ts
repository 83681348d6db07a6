/**
 * Error codes of a connection refused over its credential or its TLS (src/errors/credentials.ts); each
 * has a row in docs/errors.md. One per hop and kind, so an alert or a runbook can branch on the code.
 */
export const CREDENTIAL_ERROR_CODES = [
  'KAFKA_AUTH_FAILED',
  'KAFKA_ACL_DENIED',
  'KAFKA_TLS_FAILED',
  'KAFKA_IAM_SIGNER_MISSING',
  'DB_AUTH_FAILED',
  'DB_TLS_FAILED',
  'CONNECT_AUTH_FAILED',
  'CONNECT_ACCESS_DENIED',
  'CONNECT_TLS_FAILED',
  'REGISTRY_AUTH_FAILED',
  'REGISTRY_TLS_FAILED',
] as const;
