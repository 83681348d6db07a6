import { createHash } from 'node:crypto';

/** The outbox's statement-level AFTER INSERT trigger that sends the NOTIFY (names are per table). */
export const NOTIFY_TRIGGER = 'outbox_relay_notify';

/**
 * The channel the outbox's notify trigger (src/provision/relay-notify.ts) signals after an INSERT and
 * the relay LISTENs on: one per outbox table. A channel name is an identifier (at most 63 bytes), so the
 * table's name is hashed into it rather than spelled out.
 */
export function relayChannel(schema: string, table: string): string {
  return `outbox_relay_${createHash('md5').update(`${schema}.${table}`).digest('hex').slice(0, 16)}`;
}

/**
 * Wakes the relay's idle workers. Each worker sleeps between polls in `sleep`; `wakeAll` (a notification
 * arrived) ends every sleep at once. A wake that finds a worker busy (claiming, publishing) is kept for
 * it, so its next sleep returns at once: the row that caused the notification may have committed after
 * the worker's claim read the table, and must not wait a whole poll interval.
 */
export interface WakeSignal {
  /** Resolves after `ms`, on `wakeAll`, or on abort; true unless aborted. */
  sleep(worker: number, ms: number, signal: AbortSignal): Promise<boolean>;
  wakeAll(): void;
  /** Wakes delivered since creation (each call of wakeAll counts once). */
  readonly wakes: number;
}

export function createWakeSignal(): WakeSignal {
  const sleepers = new Map<number, () => void>();
  const pending = new Set<number>();
  const known = new Set<number>();
  let wakes = 0;
  return {
    get wakes() {
      return wakes;
    },
    wakeAll() {
      wakes++;
      for (const worker of known) if (!sleepers.has(worker)) pending.add(worker);
      for (const wake of [...sleepers.values()]) wake();
    },
    sleep(worker, ms, signal) {
      known.add(worker);
      if (signal.aborted) return Promise.resolve(false);
      if (pending.delete(worker)) return Promise.resolve(true);
      return new Promise((resolve) => {
        const done = (result: boolean) => {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          sleepers.delete(worker);
          resolve(result);
        };
        const onAbort = () => done(false);
        const timer = setTimeout(() => done(true), ms);
        signal.addEventListener('abort', onAbort, { once: true });
        sleepers.set(worker, () => done(true));
      });
    },
  };
}
