/** src/connector/slot-peek.ts: the per-transaction position of a stopped connector. */
import { streamPosition, widenXid } from '../../../src/connector/slot-peek';

describe('streamPosition', () => {
  it('takes the commit position from lsn_commit, never from the change positions lsn or lsn_proc', () => {
    const offset = { lsn_commit: 1_000, lsn_proc: 5_000, lsn: 5_000, txId: 77 };
    expect(streamPosition(900n, offset)).toEqual({ commitLsn: 1_000n, event: { xid: 77n, lsn: 5_000n } });
    expect(streamPosition(2_000n, offset).commitLsn).toBe(2_000n);
  });

  it('without an offset, or with one lacking lsn_commit, only confirmed_flush_lsn counts', () => {
    expect(streamPosition(900n, undefined)).toEqual({ commitLsn: 900n });
    expect(streamPosition(900n, { lsn: 5_000 })).toEqual({ commitLsn: 900n });
    expect(streamPosition(undefined, { lsn_commit: '1200', lsn: '1300', txId: '5' })).toEqual({ commitLsn: 1_200n, event: { xid: 5n, lsn: 1_300n } });
  });
});

describe('widenXid', () => {
  it('puts a 32-bit xid in the epoch of a later xid8, or the one before across a wrap', () => {
    expect(widenXid(10n, 2n ** 32n * 3n + 20n)).toBe(2n ** 32n * 3n + 10n);
    expect(widenXid(2n ** 32n - 5n, 2n ** 32n * 3n + 20n)).toBe(2n ** 32n * 3n - 5n);
  });
});
