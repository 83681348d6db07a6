/**
 * The one error type of outbox-router. Every code has a row in docs/errors.md saying how to fix it;
 * messages name the bad value and the fix, so a CLI can print `message` and nothing else.
 */
import { CONSOLE_ERROR_CODES } from './console-codes';
import { CREDENTIAL_ERROR_CODES } from './credential-codes';
import { RELAY_ERROR_CODES } from './relay-codes';
import { WATCHDOG_ERROR_CODES } from './watchdog-codes';

export const ERROR_CODES = [
  'CONFIG_INVALID',
  'CONFIG_FILE_INVALID',
  'TLS_FILE_UNREADABLE',
  'FLAG_INVALID',
  'TOPIC_PATTERN_INVALID',
  'DLQ_TOPIC_MISSING',
  'PARKED_NOT_FOUND',
  'TEMPLATE_VALUE_MISSING',
  'SCHEMAS_NOT_FOUND',
  'MIGRATION_FILES_INVALID',
  'CONNECTOR_PROPERTY_FORBIDDEN',
  'HANDLERS_INVALID',
  'CONSUMER_NAME_REQUIRED',
  'GROUP_ID_MISMATCH',
  'INBOX_RETENTION_TOO_SHORT',
  // The inbox is not in the shape router.inboxPartitionIntervalMs asks for (partitioned or not), or migration 016 is missing.
  'INBOX_NOT_PARTITIONED',
  'OUTBOX_CLEANUP_UNAVAILABLE',
  'RELAY_SWITCH_REFUSED',
  'WRITER_MODE_CONFLICT',
  'PROVISION_ROLE_CONFLICT',
  'HEALTH_PORT_UNAVAILABLE',
  'DEV_COMMAND_UNAVAILABLE',
  'DEMO_NOT_READY',
  'INTERNAL',
  'TOPIC_GROWTH_REFUSED',
  'STACK_JAVA_MISSING',
  'STACK_MAVEN_MISSING',
  'STACK_POSTGRES_MISSING',
  'STACK_PORT_IN_USE',
  'STACK_DOWNLOAD_FAILED',
  'STACK_SERVICE_FAILED',
  'STACK_NOT_READY',
  'KAFKA_SEND_UNACKNOWLEDGED',
  'STACK_PROFILE_MISMATCH',
  'DB_UNAVAILABLE',
  'PREFLIGHT_FAILED',
  'MIGRATION_CHANGED',
  'PROVISION_FAILED',
  'ROLE_PASSWORD_REQUIRED',
  'NOT_IN_TRANSACTION',
  'EVENT_INVALID',
  'PAYLOAD_TOO_LARGE',
  // codec (src/codec)
  'SCHEMA_INVALID',
  'EVENT_TYPE_UNKNOWN',
  'PAYLOAD_INVALID',
  'SCHEMA_NOT_REGISTERED',
  'SCHEMA_INCOMPATIBLE',
  'REGISTRY_UNAVAILABLE',
  'REGISTRY_REQUEST_FAILED',
  'DECODE_FAILED',
  'SCHEMA_ID_UNKNOWN',
  'REGISTRY_ACCESS_DENIED',
  'CONNECT_UNREACHABLE',
  'CONNECT_REQUEST_FAILED',
  'CONNECTOR_NOT_FOUND',
  'CONNECTOR_CONFIG_INVALID',
  'CONNECT_EXACTLY_ONCE_DISABLED',
  'CONNECTOR_UNSAFE',
  'TOPIC_REPLICATION_UNSAFE',
  'SLOT_MISSING_AFTER_FAILOVER',
  'CONNECTOR_PREREQUISITE_MISSING',
  'CONNECTOR_FAILED',
  'CONNECTOR_TIMEOUT',
  'CONNECTOR_DELETE_UNSAFE',
  // kafka:acls (src/acls)
  'ACL_TOPICS_UNDERIVABLE',
  'ACL_PRINCIPAL_INVALID',
  // router (src/router)
  'RECORD_INVALID',
  'HANDLER_NOT_FOUND',
  'HANDLER_FAILED',
  'DLQ_UNAVAILABLE',
  'DLQ_REJECTED',
  'HANDLER_TIMEOUT',
  'KEY_PARKED',
  'HANDLER_ENDED_TRANSACTION',
  ...WATCHDOG_ERROR_CODES,
  ...RELAY_ERROR_CODES,
  ...CONSOLE_ERROR_CODES,
  ...CREDENTIAL_ERROR_CODES,
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export interface OutboxErrorOptions {
  retriable?: boolean;
  cause?: unknown;
  /** Machine-readable facts for logs and `--json` output. Never put secrets here. */
  details?: Record<string, unknown>;
}

export class OutboxError extends Error {
  readonly code: ErrorCode;
  readonly retriable: boolean;
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, message: string, options: OutboxErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'OutboxError';
    this.code = code;
    this.retriable = options.retriable ?? false;
    this.details = Object.freeze({ ...(options.details ?? {}) });
  }
}

export function isOutboxError(value: unknown, code?: ErrorCode): value is OutboxError {
  return value instanceof OutboxError && (code === undefined || value.code === code);
}

/**
 * Whatever was thrown, as an OutboxError: an OutboxError as it is, anything else (a bug, or a library's
 * own error nothing translated) as INTERNAL with its message and the original as `cause`. The CLI
 * wraps at its boundary with this, so no plain Error reaches the user.
 */
export function toOutboxError(error: unknown): OutboxError {
  if (error instanceof OutboxError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new OutboxError('INTERNAL', `unexpected failure, please report it: ${message || (error as Error)?.name || 'no message'}`, {
    cause: error,
    details: { name: error instanceof Error ? error.name : typeof error },
  });
}

/**
 * The one paragraph the CLI prints for an error: the message, then the code and where to read about it.
 * A failed write to a file (permissions, a full disk) says which file and what to do.
 */
export function cliErrorText(error: unknown): string {
  const fsError = error as NodeJS.ErrnoException | undefined;
  if (!(error instanceof OutboxError) && fsError?.path && ['EACCES', 'EPERM', 'EROFS', 'ENOSPC'].includes(fsError.code ?? '')) {
    return (
      `outbox: cannot write ${fsError.path} (${fsError.code}). Make it writable, free disk space, or point ` +
      'OUTBOX_STACK_DIR / OUTBOX_CACHE_DIR elsewhere.\n'
    );
  }
  const wrapped = toOutboxError(error);
  return `outbox: ${wrapped.message}\n(error code ${wrapped.code}; see docs/errors.md)\n`;
}
