/** src/connector/drop-guard.ts: when connector:delete --drop-slot refuses. */
import { DROP_TOLERANCE_BYTES, dropRefusal, type Unconfirmed } from '../../../src/connector/drop-guard';

const work = (over: Partial<Unconfirmed>): Unconfirmed => ({
  slotName: 's1',
  unconfirmedBytes: 4096,
  confirmedFlushLsn: '0/3000000',
  position: '0/3000000',
  outboxRows: 0,
  ...over,
});

describe('dropRefusal', () => {
  it('lets a slot with no outbox row behind it go, whatever other WAL the cluster wrote', () => {
    expect(dropRefusal('c', undefined)).toBeUndefined();
    expect(dropRefusal('c', work({ outboxRows: 0, unconfirmedBytes: 500 * DROP_TOLERANCE_BYTES }))).toBeUndefined();
  });

  it('refuses with the row count, the unconfirmed bytes and the ways out', () => {
    const error = dropRefusal('conn', work({ outboxRows: 3, unconfirmedBytes: 123456 }));
    expect(error?.code).toBe('CONNECTOR_DELETE_UNSAFE');
    expect(error?.message).toMatch(/3 committed outbox row\(s\) lie past the connector's position 0\/3000000: not published yet/);
    expect(error?.message).toContain('123456 bytes of WAL unconfirmed');
    expect(error?.message).toContain('connector:resume');
    expect(error?.message).toContain('--force');
    expect(error?.details).toMatchObject({ outboxRows: 3, unconfirmedBytes: 123456 });
  });

  it('falls back to the unconfirmed bytes when the rows cannot be counted', () => {
    expect(dropRefusal('c', work({ outboxRows: null, countError: 'permission denied', unconfirmedBytes: DROP_TOLERANCE_BYTES }))).toBeUndefined();
    const error = dropRefusal('c', work({ outboxRows: null, countError: 'permission denied', unconfirmedBytes: DROP_TOLERANCE_BYTES + 1 }));
    expect(error?.message).toMatch(/could not be counted \(permission denied\)/);
  });
});
