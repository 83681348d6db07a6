import type { Command } from 'commander';
import { isOutboxError } from '../errors';
import { createLogger, type LogFormat, type Logger } from '../log';

export interface GlobalOptions {
  logLevel?: string;
  logFormat?: LogFormat;
}

export function loggerFor(command: Command): Logger {
  const opts = command.optsWithGlobals<GlobalOptions>();
  return createLogger({ level: opts.logLevel as never, format: opts.logFormat });
}

/**
 * Runs one command's body: an OutboxError becomes its one-paragraph message and exit code 1; anything
 * else is a bug, printed with its stack. The exit code of a successful body may be chosen by it.
 */
export function action<A extends unknown[]>(body: (...args: A) => Promise<number | void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      const code = await body(...args);
      process.exitCode = typeof code === 'number' ? code : 0;
    } catch (error) {
      const fsError = error as NodeJS.ErrnoException;
      if (!isOutboxError(error) && fsError?.path && ['EACCES', 'EPERM', 'EROFS', 'ENOSPC'].includes(fsError.code ?? '')) {
        process.stderr.write(
          `outbox: cannot write ${fsError.path} (${fsError.code}). Make it writable, free disk space, or point ` +
            'OUTBOX_STACK_DIR / OUTBOX_CACHE_DIR elsewhere.\n',
        );
      } else if (isOutboxError(error)) {
        process.stderr.write(`outbox: ${error.message}\n(error code ${error.code}; see docs/errors.md)\n`);
      } else {
        process.stderr.write(`outbox: unexpected failure, please report it: ${(error as Error)?.stack ?? String(error)}\n`);
      }
      process.exitCode = 1;
    }
  };
}

export function formatMs(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}
