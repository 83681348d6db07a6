/**
 * The integration tests' one polling wait: probes until `ok` holds, and fails (never hangs) after the
 * timeout with the last value seen. `waitsUpTo(ms)` gives an `until` whose default timeout suits a file.
 */
export type Until = <T>(what: string, probe: () => T | Promise<T>, ok: (value: T) => boolean, timeoutMs?: number) => Promise<T>;

export function waitsUpTo(defaultTimeoutMs: number, pollMs = 50): Until {
  return async (what, probe, ok, timeoutMs = defaultTimeoutMs) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await probe();
      if (ok(value)) return value;
      if (Date.now() > deadline) throw new Error(`${what}: not reached within ${timeoutMs} ms; last: ${JSON.stringify(value)}`);
      await new Promise((r) => setTimeout(r, pollMs));
    }
  };
}
