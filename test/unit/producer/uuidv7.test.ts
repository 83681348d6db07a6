import { z } from 'zod';
import { uuidv7 } from '../../../src/producer/uuidv7';

describe('uuidv7', () => {
  it('is an RFC 9562 version-7 UUID carrying the given millisecond timestamp', () => {
    const at = Date.parse('2026-11-30T12:00:00.123Z');
    const id = uuidv7(at);
    expect(z.uuid().safeParse(id).success).toBe(true);
    expect(id[14]).toBe('7');
    expect(['8', '9', 'a', 'b']).toContain(id[19]);
    expect(Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16)).toBe(at);
  });

  it('sorts by time, so later ids land at the right edge of the primary-key index', () => {
    const ids = [1_000, 2_000, 3_000, 1_700_000_000_000].map((t) => uuidv7(t));
    expect([...ids].sort()).toEqual(ids);
  });

  it('differs between two ids of the same millisecond', () => {
    expect(uuidv7(42)).not.toBe(uuidv7(42));
  });

  it('increases strictly within one millisecond and across a counter overflow (the relay orders one transaction by id)', () => {
    const now = Date.now() + 60_000;
    const ids = Array.from({ length: 5_000 }, () => uuidv7(now)); // more than the 4,096 a counter holds
    for (let i = 1; i < ids.length; i++) expect((ids[i] as string) > (ids[i - 1] as string)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('never goes back when the clock does', () => {
    const later = uuidv7(Date.now() + 120_000);
    expect(uuidv7(Date.now()) > later).toBe(true);
  });
});
