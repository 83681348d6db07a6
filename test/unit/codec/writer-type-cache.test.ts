/** src/codec/writer-type-cache.ts: found schemas are kept, "not found" only briefly, failures never. */
import type { Type } from 'avsc';
import { parseAvroType } from '../../../src/codec/logical-types';
import { createWriterTypeCache } from '../../../src/codec/writer-type-cache';
import { OutboxError } from '../../../src/errors';

const TYPE = parseAvroType({ type: 'record', name: 'T', fields: [{ name: 'a', type: 'int' }] });

function registry() {
  const known = new Map<number, Type>();
  const fetches: number[] = [];
  let failing = false;
  return {
    known,
    fetches,
    fail: (on: boolean) => {
      failing = on;
    },
    fetch: async (id: number) => {
      fetches.push(id);
      if (failing) throw new OutboxError('REGISTRY_UNAVAILABLE', 'down', { retriable: true });
      return known.get(id);
    },
  };
}

describe('writer type cache', () => {
  let clock = 0;
  const now = () => clock;
  beforeEach(() => {
    clock = 1_000;
  });

  it('keeps a found schema for good: one fetch per id', async () => {
    const r = registry();
    r.known.set(7, TYPE);
    const get = createWriterTypeCache(r.fetch, { notFoundCacheMs: 100, now });
    expect(await get(7)).toBe(TYPE);
    clock += 1_000_000;
    expect(await get(7)).toBe(TYPE);
    expect(r.fetches).toEqual([7]);
  });

  it('believes "not found" only for notFoundCacheMs, then asks again and sees a schema registered since', async () => {
    const r = registry();
    const get = createWriterTypeCache(r.fetch, { notFoundCacheMs: 100, now });
    expect(await get(7)).toBeUndefined();
    clock += 50;
    expect(await get(7)).toBeUndefined();
    expect(r.fetches).toEqual([7]);
    r.known.set(7, TYPE);
    clock += 50;
    expect(await get(7)).toBe(TYPE);
    expect(r.fetches).toEqual([7, 7]);
  });

  it('defaults to a short not-found cache (seconds, not the life of the process)', async () => {
    const r = registry();
    const get = createWriterTypeCache(r.fetch, { now });
    expect(await get(7)).toBeUndefined();
    r.known.set(7, TYPE);
    clock += 60_000;
    expect(await get(7)).toBe(TYPE);
  });

  it('never keeps a failure, and shares one request between concurrent lookups', async () => {
    const r = registry();
    r.known.set(7, TYPE);
    const get = createWriterTypeCache(r.fetch, { notFoundCacheMs: 100, now });
    r.fail(true);
    await expect(get(7)).rejects.toMatchObject({ code: 'REGISTRY_UNAVAILABLE' });
    r.fail(false);
    const [a, b] = await Promise.all([get(7), get(7)]);
    expect([a, b]).toEqual([TYPE, TYPE]);
    expect(r.fetches).toEqual([7, 7]);
  });
});
