import type { RouterEventName } from './types';

/** A record held now, waiting out the schema registry while it is decoded; its partition waits with it. */
export interface RecordWait {
  topic: string;
  partition: number;
  offset: string;
  key: string;
  /** The error code of the last failed try (SCHEMA_ID_UNKNOWN, REGISTRY_UNAVAILABLE, …). */
  code: string;
  /** Since the record's first failed try. */
  seconds: number;
}

export interface RecordWaits {
  /** Pass as (one of) the router's event listeners. */
  onEvent(name: RouterEventName, data: Record<string, unknown>): void;
  /** The records waiting now, the longest-waiting first. */
  list(): RecordWait[];
}

/**
 * The records waiting now, read from the router's own events, so the metrics (which only see events)
 * and /healthz tell the same story. Tracked: `router.wait` events that carry `waitedMs`, whose wait
 * always ends with a `router.wait-ended` (the decode wait, src/router/prepare.ts); a `router.wait` of
 * another kind (database, DLQ producer) is counted by the waits counter only.
 */
export function createRecordWaits(now: () => number = Date.now): RecordWaits {
  const waiting = new Map<string, Omit<RecordWait, 'seconds'> & { sinceMs: number }>();
  const keyOf = (data: Record<string, unknown>) => `${String(data.topic)}\u0000${String(data.partition)}\u0000${String(data.offset)}`;
  return {
    onEvent(name, data) {
      if (name === 'router.wait' && typeof data.waitedMs === 'number') {
        const key = keyOf(data);
        const code = String(data.code ?? 'unknown');
        const known = waiting.get(key);
        if (known) known.code = code;
        else waiting.set(key, { topic: String(data.topic), partition: Number(data.partition), offset: String(data.offset), key: String(data.key ?? ''), code, sinceMs: now() - data.waitedMs });
      } else if (name === 'router.wait-ended') {
        waiting.delete(keyOf(data));
      }
    },
    list() {
      const at = now();
      return [...waiting.values()]
        .sort((a, b) => a.sinceMs - b.sinceMs)
        .map(({ sinceMs, ...wait }) => ({ ...wait, seconds: Math.max(0, (at - sinceMs) / 1000) }));
    },
  };
}
