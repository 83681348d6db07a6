/**
 * The tests' one polling wait: probes until `ok` holds (without `ok`: until the probe gives something
 * other than undefined, null or false), and fails (never hangs) after the timeout with the last value
 * seen. `waitsUpTo(ms)` gives an `until` whose default timeout suits a file; `until` has 30 s.
 */
import { setTimeout as sleep } from 'node:timers/promises';

type Falsy = undefined | null | false;

export interface Until {
  <T>(what: string, probe: () => T | Promise<T>, ok: (value: T) => boolean, timeoutMs?: number): Promise<T>;
  <T>(what: string, probe: () => T | Falsy | Promise<T | Falsy>, timeoutMs?: number): Promise<T>;
}

const found = (value: unknown) => value !== undefined && value !== null && value !== false;

export function waitsUpTo(defaultTimeoutMs: number, pollMs = 50): Until {
  return (async (what: string, probe: () => unknown, okOrTimeout?: ((value: unknown) => boolean) | number, timeoutArg?: number) => {
    const ok = typeof okOrTimeout === 'function' ? okOrTimeout : found;
    const timeoutMs = (typeof okOrTimeout === 'number' ? okOrTimeout : timeoutArg) ?? defaultTimeoutMs;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await probe();
      if (ok(value)) return value;
      if (Date.now() > deadline) throw new Error(`${what}: not reached within ${timeoutMs} ms; last: ${JSON.stringify(value)}`);
      await sleep(pollMs);
    }
  }) as Until;
}

export const until: Until = waitsUpTo(30_000);
