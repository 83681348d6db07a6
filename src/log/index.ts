import pino, { type Logger, type LevelWithSilent } from 'pino';
import pretty from 'pino-pretty';
import { REDACTED, REDACTED_PATHS } from './redact';

export type { Logger } from 'pino';
export type LogFormat = 'json' | 'pretty';

export interface LoggerOptions {
  level?: LevelWithSilent;
  /** `json` for machines (default when stderr is not a terminal), `pretty` for people. */
  format?: LogFormat;
  name?: string;
}

export { REDACTED, REDACTED_PATHS, SECRET_KEY, isSecretKey, redactSecrets, redactUrl, redactValue, scrubHttpError, urlOrigin } from './redact';

export function defaultLogFormat(): LogFormat {
  const fromEnv = process.env.LOG_FORMAT;
  if (fromEnv === 'json' || fromEnv === 'pretty') return fromEnv;
  return process.stderr.isTTY ? 'pretty' : 'json';
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? ((process.env.LOG_LEVEL as LevelWithSilent | undefined) || 'info');
  const format = options.format ?? defaultLogFormat();
  const base = { name: options.name ?? 'outbox', level, redact: { paths: REDACTED_PATHS, censor: REDACTED } };
  if (format === 'pretty') {
    // Synchronous pretty stream (no worker thread) so short CLI runs never lose their last lines.
    return pino(base, pretty({ destination: 2, sync: true, ignore: 'pid,hostname,name,step,ms', translateTime: 'HH:MM:ss.l' }));
  }
  return pino(base, pino.destination({ dest: 2, sync: true }));
}
