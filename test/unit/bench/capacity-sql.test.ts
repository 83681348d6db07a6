import { chunks, inboxChunkSql, outboxWindowSql, routerInboxInsertSql, rowMsSql, uuidv7, uuidv7Ms } from '../../../scripts/bench/capacity-sql';

describe('capacity bench SQL', () => {
  it('makes UUIDv7 ids whose first 48 bits are the millisecond, version 7, variant 10', () => {
    const ms = Date.UTC(2026, 11, 6, 12, 34, 56, 789);
    for (let i = 0; i < 50; i++) {
      const id = uuidv7(ms);
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(uuidv7Ms(id)).toBe(ms);
    }
  });

  it('spreads rows evenly over the span, in row order', () => {
    expect(rowMsSql('g', 1000, 700, 7)).toBe('(1000::bigint + (g)::bigint * 700::bigint / 7::bigint)');
  });

  it('covers every row once in chunks', () => {
    expect(chunks(10, 4)).toEqual([
      [0, 4],
      [4, 8],
      [8, 10],
    ]);
  });

  it('fills message_ms only in the partitioned inbox', () => {
    const span = { startMs: 0, spanMs: 1000, rows: 10, salt: 's' };
    expect(inboxChunkSql('public.inbox', 'c', span, 0, 10, true)).toContain('(consumer, message_id, processed_at, message_ms)');
    expect(inboxChunkSql('public.inbox', 'c', span, 0, 10, false)).toContain('(consumer, message_id, processed_at) ');
    expect(inboxChunkSql('public.inbox', "o'c", span, 0, 10, false)).toContain("'o''c'");
  });

  it("is the router's INSERT, with message_ms when the inbox has the key function", () => {
    const sql = routerInboxInsertSql('public.inbox', "'r'", 'public.inbox_message_ms', ['0190a0b0-0000-7000-8000-000000000000']);
    expect(sql).toBe(
      "BEGIN; INSERT INTO public.inbox (consumer, message_id, processed_at, message_ms) SELECT 'r', id, now(), public.inbox_message_ms(id::text) " +
        "FROM unnest('{0190a0b0-0000-7000-8000-000000000000}'::uuid[]) AS t(id) ON CONFLICT DO NOTHING RETURNING message_id::text, txid_current()::text AS txid",
    );
  });

  it("names and bounds a past outbox window as migration 015's function does", () => {
    const lo = Date.UTC(2026, 10, 30, 13);
    const hex = lo.toString(16).padStart(12, '0');
    const hi = (lo + 3_600_000).toString(16).padStart(12, '0');
    expect(outboxWindowSql('public', 'outbox', lo, 3_600_000)).toBe(
      `CREATE TABLE IF NOT EXISTS "public"."outbox_p20261130_130000" PARTITION OF "public"."outbox" FOR VALUES FROM ('${hex.slice(0, 8)}-${hex.slice(8)}-0000-0000-000000000000') TO ('${hi.slice(0, 8)}-${hi.slice(8)}-0000-0000-000000000000')`,
    );
  });
});
