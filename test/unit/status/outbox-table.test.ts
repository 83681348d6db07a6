import { computeVerdict, renderStatus, type StatusReport } from '../../../src/status';
import { healthy } from './fixtures';

const messages = (status: StatusReport) => computeVerdict(status).reasons.map((r) => `${r.level} ${r.message}`);
const GiB = 1024 ** 3;

function withOutbox(over: Record<string, unknown>, options: Partial<StatusReport['options']> = {}): StatusReport {
  const s = healthy();
  if (!s.outboxTable.ok) throw new Error('fixture');
  Object.assign(s.outboxTable, over);
  Object.assign(s.options, options);
  return s;
}

describe('outbox status: the outbox table section', () => {
  it('a small table with nothing old waiting is OK, and its values are shown', () => {
    const s = healthy();
    expect(messages(s)).toEqual([]);
    const out = renderStatus(s, { color: false });
    expect(out).toContain('Outbox table (public.outbox; warning: oldest waiting row over 15 min, size over 1.0 GiB)');
    expect(out).toMatch(/size \(with indexes\)\s+96\.0 KiB/);
    expect(out).toMatch(/dead tuples\s+4/);
    expect(out).toMatch(/last autovacuum\s+2026-01-02T03:00:00.000Z/);
    expect(out).toMatch(/published_at IS NULL\s+0/);
  });

  it('warns when the oldest waiting row is older than --outbox-warn-age-ms', () => {
    expect(messages(withOutbox({ oldestPendingAgeSeconds: 14 * 60, pendingRows: 3 }))).toEqual([]);
    const old = withOutbox({ oldestPendingAgeSeconds: 20 * 60, pendingRows: 3 });
    expect(messages(old)).toEqual([
      'WARNING outbox table public.outbox: the oldest row with published_at IS NULL is 20m old (over --outbox-warn-age-ms 900000): the relay is not publishing it, or (CDC) published rows are not being cleaned up',
    ]);
    expect(renderStatus(old, { color: false })).toMatch(/published_at IS NULL\s+3, the oldest 20m old/);
    expect(messages(withOutbox({ oldestPendingAgeSeconds: 20 * 60 }, { outboxWarnAgeMs: 3_600_000 }))).toEqual([]);
  });

  it('warns about the size over --outbox-warn-bytes and the waiting rows over --outbox-warn-pending (capped counts say "at least")', () => {
    expect(messages(withOutbox({ totalBytes: 2 * GiB }))).toEqual(['WARNING outbox table public.outbox takes 2.0 GiB with its indexes (over --outbox-warn-bytes 1073741824)']);
    expect(messages(withOutbox({ pendingRows: 100_000, pendingCapped: true }))).toEqual([]);
    expect(messages(withOutbox({ pendingRows: 100_000, pendingCapped: true }, { outboxWarnPending: 5_000 }))).toEqual([
      'WARNING outbox table public.outbox: at least 100000 rows with published_at IS NULL (over --outbox-warn-pending 5000)',
    ]);
  });

  it('an unprovisioned table is shown as such and is no warning; unreadable waiting rows are', () => {
    const missing = withOutbox({ provisioned: false, totalBytes: null, estimatedRows: null });
    expect(messages(missing)).toEqual([]);
    expect(renderStatus(missing, { color: false })).toContain('Outbox table (public.outbox)\n  table not there');
    const denied = withOutbox({ oldestPendingAgeSeconds: null, pendingRows: null, pendingError: 'permission denied for table outbox' });
    expect(messages(denied)).toEqual(['WARNING outbox table public.outbox: the waiting rows could not be read (permission denied for table outbox)']);
    const unreachable = healthy();
    unreachable.outboxTable = { ok: false, ms: 3000, error: 'connect ECONNREFUSED. Check that PostgreSQL answers' };
    expect(messages(unreachable)).toEqual(['WARNING outbox table: could not be checked (connect ECONNREFUSED)']);
  });
});
