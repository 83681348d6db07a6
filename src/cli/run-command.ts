import { Command } from 'commander';
import { cliErrorText, isOutboxError } from '../errors';
import { createLogger, type LogFormat, type Logger } from '../log';
import { repeatUntilAborted } from '../service';

export interface GlobalOptions {
  logLevel?: string;
  logFormat?: LogFormat;
}

export function loggerFor(command: Command): Logger {
  const opts = command.optsWithGlobals<GlobalOptions>();
  return createLogger({ level: opts.logLevel as never, format: opts.logFormat });
}

/**
 * Runs one command's body: whatever it throws becomes the one-paragraph error text (cliErrorText: an
 * OutboxError as it is, anything else as INTERNAL) and exit code 1. The stack of an error without a code
 * is logged at debug level (`--log-level debug`), for the bug report. The exit code of a successful body
 * may be chosen by it.
 */
export function action<A extends unknown[]>(body: (...args: A) => Promise<number | void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      const code = await body(...args);
      process.exitCode = typeof code === 'number' ? code : 0;
    } catch (error) {
      process.stderr.write(cliErrorText(error));
      const command = args[args.length - 1];
      if (!isOutboxError(error) && command instanceof Command) loggerFor(command).debug({ err: error }, 'the unexpected failure, with its stack');
      process.exitCode = 1;
    }
  };
}

export function formatMs(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/**
 * The body of a housekeeping command (inbox:prune, outbox:cleanup): one run with --once (for cron), else
 * a run every `intervalMs` until SIGTERM or SIGINT; a failed run is reported and the next one tries again.
 */
export async function runOnceOrEvery(run: (signal: AbortSignal) => Promise<void>, options: { once: boolean; intervalMs: number; onError: (error: unknown) => void }): Promise<void> {
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGTERM', onSignal).once('SIGINT', onSignal);
  try {
    if (options.once) await run(stop.signal);
    else await repeatUntilAborted(() => run(stop.signal), { signal: stop.signal, intervalMs: options.intervalMs, onError: options.onError });
  } finally {
    process.off('SIGTERM', onSignal).off('SIGINT', onSignal);
  }
}
