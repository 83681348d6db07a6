import { isOutboxError } from '../errors';
import { redactUrl } from '../log/redact';

/** 1536 → "1.5 KiB"; null → "-". */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return '-';
  const sign = bytes < 0 ? '-' : '';
  let value = Math.abs(bytes);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${sign}${value} B` : `${sign}${value.toFixed(1)} ${units[unit]}`;
}

/** 604800000 → "7 d"; whole units only, as retention settings are. */
export function formatDuration(ms: number): string {
  const units: Array<[string, number]> = [['d', 86_400_000], ['h', 3_600_000], ['min', 60_000], ['s', 1_000]];
  for (const [unit, size] of units) if (ms >= size && ms % size === 0) return `${ms / size} ${unit}`;
  return `${ms} ms`;
}

/** `http://user:secret@host/` → `http://[redacted]@host/`: credentials in a URL never reach the output (src/log/redact.ts). */
export const maskUrl = redactUrl;

/** One line for an unreadable section: the error's own message (OutboxErrors carry their fix), else a hint. */
export function describeError(error: unknown, hint: string): string {
  if (isOutboxError(error) || error instanceof SectionTimeout) return maskUrl(error.message);
  const err = error as { code?: unknown; message?: unknown; name?: unknown };
  const message = typeof err?.message === 'string' && err.message ? err.message : String(error);
  const code = typeof err?.code === 'string' && !message.includes(err.code) ? `${err.code}: ` : '';
  return maskUrl(`${code}${message.split('\n')[0]}. ${hint}`);
}

/** Rejects with a "no answer within" error after `ms`; the work itself is left to finish or fail on its own. */
export async function withTimeout<T>(ms: number, work: () => Promise<T>, hint: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new SectionTimeout(`no answer within ${ms} ms (--timeout). ${hint}`)), ms);
  });
  try {
    return await Promise.race([work(), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export class SectionTimeout extends Error {
  override name = 'SectionTimeout';
}
