import { closeSync, fsyncSync, openSync, readSync, statSync, writeSync } from 'node:fs';
import { OutboxError } from '../errors';
import { redactSecrets } from '../log/redact';

/** One line of the audit log: who did what, when, and how it ended. */
export interface AuditEntry {
  /** ISO 8601. */
  at: string;
  /** The operator (basic-auth username, or `token`) and where the request came from. */
  who: { operator: string; via: string; address: string | null };
  /** The action (`replay`, `release`, `connector-restart`, …) and what it was given. */
  what: { action: string; request: Record<string, unknown> };
  /** `started` is written before the action runs, `ok` or `failed` after it. */
  phase: 'started' | 'ok' | 'failed';
  result?: Record<string, unknown>;
  error?: { code: string; message: string };
  /** Ties the `started` line to its end. */
  id: string;
}

export interface AuditLog {
  readonly path: string;
  /** Appends one line and flushes it to disk before returning (an action is not run unless this worked). */
  write(entry: AuditEntry): void;
  /** The last `limit` entries, newest first (read back from the file). */
  recent(limit: number): AuditEntry[];
  close(): void;
}

/** How much of the file `recent` reads from its end. */
const TAIL_BYTES = 256 * 1024;

/**
 * The audit log: a JSON-lines file opened for appending at start (CONSOLE_AUDIT_UNWRITABLE when it
 * cannot be), each line written with one write() and fsync'd, so a crash loses no finished line. Values
 * whose keys name secrets are redacted as in every log.
 */
export function openAuditLog(path: string): AuditLog {
  let fd: number;
  try {
    fd = openSync(path, 'a', 0o600);
  } catch (error) {
    throw new OutboxError('CONSOLE_AUDIT_UNWRITABLE', `Cannot open the console's audit log ${path} for appending: ${(error as Error).message}. Set console.auditLog (OUTBOX_CONSOLE_AUDIT_LOG, --audit-log) to a writable file, or run with --read-only.`, {
      cause: error,
      details: { path },
    });
  }
  return {
    path,
    write(entry) {
      try {
        writeSync(fd, `${JSON.stringify(redactSecrets(entry))}\n`);
        fsyncSync(fd);
      } catch (error) {
        throw new OutboxError('CONSOLE_AUDIT_UNWRITABLE', `Cannot write to the console's audit log ${path}: ${(error as Error).message}. Nothing was done; free the disk or fix the file's permissions.`, {
          cause: error,
          details: { path },
        });
      }
    },
    recent(limit) {
      const size = statSync(path).size;
      const text = size === 0 ? '' : readTail(path, size);
      const lines = text.split('\n').filter(Boolean);
      const entries: AuditEntry[] = [];
      for (let i = lines.length - 1; i >= 0 && entries.length < limit; i--) {
        try {
          entries.push(JSON.parse(lines[i] as string) as AuditEntry);
        } catch {
          // The first line of a tail read may be cut: skipped.
        }
      }
      return entries;
    },
    close: () => closeSync(fd),
  };
}

function readTail(path: string, size: number): string {
  const length = Math.min(size, TAIL_BYTES);
  const buffer = Buffer.alloc(length);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, buffer, 0, length, size - length);
  } finally {
    closeSync(fd);
  }
  return buffer.toString('utf8');
}
