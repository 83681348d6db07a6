/** src/connector/slot-guard.ts: refusing deploys whose slot and stored offset disagree. */
import { parseLsn, slotGuard, type SlotInfo } from '../../../src/connector';
import { failoverSlotWarning, formatLsn, offsetForServer, offsetLsn, type GuardInput } from '../../../src/connector/slot-guard';

const slot = (over: Partial<SlotInfo> = {}): SlotInfo => ({
  slotName: 's',
  database: 'app',
  plugin: 'pgoutput',
  active: false,
  activePid: null,
  restartLsn: '0/3806228',
  confirmedFlushLsn: '0/3806260',
  walStatus: 'reserved',
  retainedWalBytes: 100,
  confirmedLagBytes: 50,
  ...over,
});
const at = (lsn: string) => ({ lsn_proc: Number(parseLsn(lsn)), lsn_commit: Number(parseLsn(lsn)), lsn: Number(parseLsn(lsn)), txId: 1 });
const input = (over: Partial<GuardInput>): GuardInput => ({ slotName: 's', database: 'app', slot: undefined, offset: undefined, connector: 'absent', ...over });
const codes = (over: Partial<GuardInput>) => slotGuard(input(over)).map((f) => f.code);

describe('LSNs', () => {
  it('parses and formats X/Y hex positions', () => {
    expect(parseLsn('0/3806260')).toBe(58745440n);
    expect(parseLsn('16/B374D848')).toBe((0x16n << 32n) + 0xb374d848n);
    expect(formatLsn(parseLsn('16/B374D848'))).toBe('16/B374D848');
    expect(() => parseLsn('nope')).toThrow(expect.objectContaining({ code: 'INTERNAL', message: expect.stringContaining('not a PostgreSQL LSN') }));
  });

  it('takes the furthest of lsn_commit, lsn_proc and lsn from an offset', () => {
    expect(offsetLsn({ lsn: 10, lsn_proc: 30, lsn_commit: 20 })).toBe(30n);
    expect(offsetLsn({ lsn: 10 })).toBe(10n);
    expect(offsetLsn({ lsn_commit: null, lsn: '12' })).toBe(12n);
    expect(offsetLsn({ txId: 3 })).toBeUndefined();
    expect(offsetLsn(undefined)).toBeUndefined();
  });

  it('picks the offset of the partition {server: topic.prefix}', () => {
    const offsets = [
      { partition: { server: 'old' }, offset: { lsn: 1 } },
      { partition: { server: 'outbox' }, offset: { lsn: 2 } },
    ];
    expect(offsetForServer(offsets, 'outbox')).toEqual({ lsn: 2 });
    expect(offsetForServer(offsets, 'other')).toBeUndefined();
  });
});

describe('slotGuard', () => {
  it('finds nothing for a first deploy (no slot, no offset)', () => {
    expect(codes({})).toEqual([]);
  });

  it('finds nothing when the slot trails or equals the stored offset', () => {
    expect(codes({ slot: slot(), offset: at('0/3806260'), connector: 'same-slot' })).toEqual([]);
    expect(codes({ slot: slot({ confirmedFlushLsn: '0/3806000' }), offset: at('0/3806260'), connector: 'same-slot' })).toEqual([]);
  });

  it('refuses a slot without a stored offset: its position is unknown', () => {
    const [finding] = slotGuard(input({ slot: slot({ active: true, activePid: 4242 }) }));
    expect(finding?.code).toBe('slot-without-offset');
    expect(finding?.message).toContain('walsender pid 4242');
    expect(codes({ slot: slot(), connector: 'other-slot' })).toEqual(['slot-without-offset']);
  });

  it('accepts a slot the same connector made before its first offset flush', () => {
    expect(codes({ slot: slot({ active: true }), connector: 'same-slot' })).toEqual([]);
  });

  it('refuses a stored offset whose slot is gone (DBZ-5739)', () => {
    const [finding] = slotGuard(input({ offset: at('0/3806260'), connector: 'same-slot' }));
    expect(finding?.code).toBe('offset-without-slot');
    expect(finding?.message).toContain('0/3806260');
    expect(finding?.message).toContain('DBZ-5739');
  });

  it('refuses a slot confirmed past the stored offset, naming the skipped bytes', () => {
    const [finding] = slotGuard(input({ slot: slot({ confirmedFlushLsn: '0/3806300' }), offset: at('0/3806260'), connector: 'same-slot' }));
    expect(finding?.code).toBe('slot-ahead-of-offset');
    expect(finding?.message).toContain('by 160 bytes');
  });

  it('refuses slots of another database or plugin, and invalidated ones', () => {
    expect(codes({ slot: slot({ database: 'other' }), offset: at('0/3806260'), connector: 'same-slot' })).toEqual(['slot-other-database']);
    expect(codes({ slot: slot({ plugin: 'decoderbufs' }), offset: at('0/3806260'), connector: 'same-slot' })).toEqual(['slot-other-plugin']);
    expect(codes({ slot: slot({ walStatus: 'lost', confirmedFlushLsn: null }), offset: at('0/3806260'), connector: 'same-slot' })).toEqual(['slot-lost']);
  });

  it('refuses a first deploy (no slot yet) while the outbox holds unpublished rows, naming the count and the ways out', () => {
    const rows = { count: 7, table: '"public"."outbox"' };
    const [finding] = slotGuard(input({ preSlotRows: rows }));
    expect(finding?.code).toBe('rows-before-slot');
    expect(finding?.message).toMatch(/^7 outbox row\(s\) in "public"\."outbox" are unpublished/);
    expect(finding?.message).toContain('outbox relay');
    expect(finding?.message).toContain('snapshot.mode=initial');
    // Once the slot exists, rows are behind or ahead of it, not before it: no check.
    expect(codes({ slot: slot({ active: true }), connector: 'same-slot', preSlotRows: rows })).toEqual([]);
    expect(codes({ preSlotRows: { count: 0, table: rows.table } })).toEqual([]);
  });
});

describe('failover slots (PostgreSQL 17)', () => {
  it('names a slot missing under a stored offset on a promoted server as SLOT_MISSING_AFTER_FAILOVER, and never as that on timeline 1', () => {
    const [promotedFinding] = slotGuard(input({ offset: at('0/5000'), timeline: 2 }));
    expect(promotedFinding?.code).toBe('offset-without-slot');
    expect(promotedFinding?.message).toContain('SLOT_MISSING_AFTER_FAILOVER: this server is on WAL timeline 2');
    expect(promotedFinding?.message).toContain('outbox relay');
    const [plain] = slotGuard(input({ offset: at('0/5000'), timeline: 1 }));
    expect(plain?.message).not.toContain('SLOT_MISSING_AFTER_FAILOVER');
    expect(plain?.message).toContain('DBZ-5739');
  });

  it('warns when a failover slot is wanted but the existing slot is not one, with the ALTER_REPLICATION_SLOT way', () => {
    const w = failoverSlotWarning(slot({ failover: false }), true, 'outbox-connector');
    expect(w).toContain('ALTER_REPLICATION_SLOT s ( FAILOVER true )');
    expect(w).toContain('replication=database');
    expect(w).toContain('/connectors/outbox-connector/stop');
    expect(w).toContain('connector:delete --drop-slot');
    expect(failoverSlotWarning(slot({ failover: true }), true, 'c')).toBeUndefined();
    expect(failoverSlotWarning(slot({ failover: null }), true, 'c')).toBeUndefined(); // before 17: nothing to alter
    expect(failoverSlotWarning(slot({ failover: false }), false, 'c')).toBeUndefined();
    expect(failoverSlotWarning(undefined, true, 'c')).toBeUndefined(); // Debezium creates it with failover
  });
});
