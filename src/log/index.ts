import pino, { type Logger, type LevelWithSilent } from 'pino';
import pretty from 'pino-pretty';

export type { Logger } from 'pino';
export type LogFormat = 'json' | 'pretty';

export interface LoggerOptions {
  level?: LevelWithSilent;
  /** `json` for machines (default when stderr is not a terminal), `pretty` for people. */
  format?: LogFormat;
  name?: string;
}

/**
 * Keys whose values are secrets wherever they appear; pino replaces them before anything is written.
 * Callers must still never build messages out of secrets.
 */
export const REDACTED_PATHS = [
  'password',
  '*.password',
  'secret',
  '*.secret',
  'connectionString',
  '*.connectionString',
  'headers.authorization',
  '*.headers.authorization',
];

export function defaultLogFormat(): LogFormat {
  const fromEnv = process.env.LOG_FORMAT;
  if (fromEnv === 'json' || fromEnv === 'pretty') return fromEnv;
  return process.stderr.isTTY ? 'pretty' : 'json';
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? ((process.env.LOG_LEVEL as LevelWithSilent | undefined) || 'info');
  const format = options.format ?? defaultLogFormat();
  const base = { name: options.name ?? 'outbox', level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } };
  if (format === 'pretty') {
    // Synchronous pretty stream (no worker thread) so short CLI runs never lose their last lines.
    return pino(base, pretty({ destination: 2, sync: true, ignore: 'pid,hostname,name,step,ms', translateTime: 'HH:MM:ss.l' }));
  }
  return pino(base, pino.destination({ dest: 2, sync: true }));
}
