import { pgCode } from '../db';
import { OutboxError, isOutboxError } from '../errors';

/** Turns a poll failure into a message that names the target and the fix; never includes secrets. */
export function describePollError(error: unknown, target: string, user: string): OutboxError {
  if (isOutboxError(error)) return error;
  const code = pgCode(error) ?? (error as { code?: string }).code;
  const message = (error as Error)?.message ?? String(error);
  const fix =
    code === '28P01' || code === '28000'
      ? `Authentication failed for role ${user}: set watchdog.user / watchdog.password (OUTBOX_WATCHDOG_USER / OUTBOX_WATCHDOG_PASSWORD) or PGUSER / PGPASSWORD to a role that may log in.`
      : code === '42501'
        ? `Role ${user} lacks a right the watchdog needs: GRANT pg_monitor TO ${user}; and GRANT CONNECT ON DATABASE to it.`
        : code === '3D000'
          ? 'The database does not exist: set PGDATABASE (database.database) to an existing one.'
          : code === '57014'
            ? 'The slot query exceeded watchdog.statementTimeoutMs (OUTBOX_WATCHDOG_STATEMENT_TIMEOUT_MS): the server is overloaded or blocked; raise the timeout only if this persists.'
            : code === '53300'
              ? 'The server has no free connection slot: raise max_connections or reserve one for monitoring.'
              : `Check that PostgreSQL runs and accepts connections at ${target} (PGHOST / PGPORT).`;
  const retriable = !['28P01', '28000', '3D000', '42501'].includes(code ?? '');
  return new OutboxError(code === '57014' || code === '42501' ? 'WATCHDOG_QUERY_FAILED' : 'DB_UNAVAILABLE', `Cannot read replication slots as ${user}@${target}: ${message}. ${fix}`, {
    retriable,
    cause: error,
    details: { code },
  });
}
