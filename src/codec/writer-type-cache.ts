import type { Type } from 'avsc';

/** How long "schema id N is not in the registry" is believed before the registry is asked again. */
export const DEFAULT_NOT_FOUND_CACHE_MS = 5_000;

export interface WriterTypeCacheOptions {
  /** Default 5 s. 0 asks the registry on every lookup of an unknown id. */
  notFoundCacheMs?: number;
  now?: () => number;
}

/**
 * Writer schemas by registry id. A schema found is kept for the life of the process: an id never
 * changes its schema. "Not found" is kept only briefly: a replica that has not seen the id yet, or a
 * schema registered just after the record was written, must become readable without a restart
 * (@kafkajs/confluent-schema-registry caches found schemas only, for the same reason). Failures are
 * not kept at all, so an outage never poisons an id. Concurrent lookups of one id share one request.
 */
export function createWriterTypeCache(fetch: (id: number) => Promise<Type | undefined>, options: WriterTypeCacheOptions = {}) {
  const notFoundMs = options.notFoundCacheMs ?? DEFAULT_NOT_FOUND_CACHE_MS;
  const now = options.now ?? Date.now;
  const entries = new Map<number, { value: Promise<Type | undefined>; missingSince?: number }>();

  return (id: number): Promise<Type | undefined> => {
    const entry = entries.get(id);
    if (entry && (entry.missingSince === undefined || now() - entry.missingSince < notFoundMs)) return entry.value;
    const fresh: { value: Promise<Type | undefined>; missingSince?: number } = { value: fetch(id) };
    entries.set(id, fresh);
    fresh.value.then(
      (type) => {
        if (type === undefined) fresh.missingSince = now();
      },
      () => {
        if (entries.get(id) === fresh) entries.delete(id);
      },
    );
    return fresh.value;
  };
}
