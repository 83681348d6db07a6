/** src/watchdog/failover-rules.ts and their place in the alert engine: failover slots judged over rows. Pure. */
import { createAlertEngine } from '../../../src/watchdog/alert-engine';
import type { StandbySample } from '../../../src/watchdog/failover-query';
import { evaluateFailoverDisabled, evaluateFailoverSlot, evaluateStandbyRead, standbyReadiness, type FailoverFacts } from '../../../src/watchdog/failover-rules';
import { exitCodeFor } from '../../../src/watchdog/once';
import { createSlotTracker } from '../../../src/watchdog/slot-tracker';
import type { ServerSettings } from '../../../src/watchdog/slot-query';
import { standbyConnection } from '../../../src/watchdog/standby';
import { loadConfig } from '../../../src/config';
import { redactConfig } from '../../../src/config/redact';
import { row, sample, wdConfig } from './fixtures';

const standbyRow = (over: Partial<StandbySample['slots'][number]> = {}): StandbySample['slots'][number] => ({
  slotName: 's1', slotType: 'logical', synced: true, temporary: false, invalidationReason: null, confirmedFlushLsn: '0/80', ...over,
});
const standby = (slots: StandbySample['slots']): StandbySample => ({ versionNum: 170005, inRecovery: true, slots });

describe('standby readiness of failover slots', () => {
  const primary = [row({ slotName: 's1', failover: true, confirmedFlushLsn: '0/100' }), row({ slotName: 'plain', failover: false })];

  it('judges only failover slots of the primary, with the lag of the copy', () => {
    expect(standbyReadiness(primary, standby([standbyRow()]))).toEqual([
      { slotName: 's1', readiness: 'ready', synced: true, temporary: false, invalidationReason: null, lagBytes: 0x80 },
    ]);
  });

  it('missing, invalidated, temporary and not synced copies are not ready (invalidation first)', () => {
    const readiness = (rows: StandbySample['slots']) => standbyReadiness(primary, standby(rows))[0]?.readiness;
    expect(readiness([])).toBe('missing');
    expect(readiness([standbyRow({ invalidationReason: 'wal_removed', temporary: true })])).toBe('invalidated');
    expect(readiness([standbyRow({ temporary: true })])).toBe('temporary');
    expect(readiness([standbyRow({ synced: false })])).toBe('not-synced');
  });

  it('is CRITICAL unless ready, and says how to set the sync up', () => {
    const missing = evaluateFailoverSlot({ slotName: 's1', readiness: 'missing', synced: null, temporary: null, invalidationReason: null, lagBytes: null }, 'sb:5432/app');
    expect(missing.level).toBe('critical');
    expect(missing.summary).toContain('sync_replication_slots=on');
    expect(evaluateFailoverSlot({ slotName: 's1', readiness: 'ready', synced: true, temporary: false, invalidationReason: null, lagBytes: 0 }, 'sb').level).toBe('ok');
  });

  it('warns about a non-failover CDC slot only on 17+ with a physical standby streaming', () => {
    const cdc = row({ slotName: 'outbox_slot', failover: false });
    expect(evaluateFailoverDisabled(cdc, 170005, { physicalStandbys: 1, timeline: 1 }, 'c').level).toBe('warning');
    expect(evaluateFailoverDisabled(cdc, 170005, { physicalStandbys: 1, timeline: 1 }, 'c').summary).toContain('ALTER_REPLICATION_SLOT outbox_slot ( FAILOVER true )');
    expect(evaluateFailoverDisabled(cdc, 170005, { physicalStandbys: 0, timeline: 1 }, 'c').level).toBe('ok');
    expect(evaluateFailoverDisabled(cdc, 160000, { physicalStandbys: 1, timeline: 1 }, 'c').level).toBe('ok');
    expect(evaluateFailoverDisabled(row({ failover: true }), 170005, { physicalStandbys: 1, timeline: 1 }, 'c').level).toBe('ok');
    expect(evaluateFailoverDisabled(cdc, undefined, null, 'c').level).toBeUndefined();
  });

  it('warns when the standby cannot be read or is not a standby', () => {
    expect(evaluateStandbyRead({ target: 'sb', error: 'connection refused' }).level).toBe('warning');
    expect(evaluateStandbyRead({ target: 'sb', sample: { ...standby([]), inRecovery: false } }).summary).toContain('not in recovery');
    expect(evaluateStandbyRead({ target: 'sb', sample: standby([]) }).level).toBe('ok');
  });
});

describe('the failover rules in the alert engine', () => {
  const MiB = 1024 * 1024;
  const pg17: ServerSettings = { versionNum: 170005, maxSlotWalKeepBytes: -1, walKeepBytes: 0, maxWalBytes: 1024 * MiB, walSegmentBytes: 16 * MiB, walSenderTimeoutMs: 60_000 };
  function poll(slots: ReturnType<typeof row>[], failover: FailoverFacts, instant = true) {
    const config = wdConfig({});
    const engine = createAlertEngine({ config, cluster: 'c1', now: () => 0, instant, connectorSlot: 'outbox_slot', connector: 'outbox-connector' });
    const tracker = createSlotTracker({ rateWindowMs: config.rateWindowMs, stalledMinWalBytes: config.rules.stalledMinWalBytes, walDiskBudgetBytes: 0 });
    const out = engine.evaluate(tracker.track(sample(0, 0x200, slots)), pg17, undefined, undefined, failover);
    return { out, statuses: engine.statuses() };
  }

  it('a failover slot missing on the standby fires FailoverSlotNotReady CRITICAL (--once exit 2)', () => {
    const { out, statuses } = poll([row({ slotName: 'outbox_slot', failover: true })], { primary: { physicalStandbys: 1, timeline: 1 }, standby: { target: 'sb:5432/app', sample: standby([]) } });
    expect(out.map((n) => [n.rule, n.severity, n.slot?.name])).toEqual([['FailoverSlotNotReady', 'critical', 'outbox_slot']]);
    expect(out[0]?.values).toMatchObject({ readiness: 'missing', standby: 'sb:5432/app' });
    expect(exitCodeFor(true, statuses)).toBe(2);
  });

  it('holds FailoverSlotNotReady for failoverSlotNotReadyForMs outside --once (a new slot syncs on its own cycle)', () => {
    const { out } = poll([row({ slotName: 'outbox_slot', failover: true })], { primary: { physicalStandbys: 1, timeline: 1 }, standby: { target: 'sb', sample: standby([]) } }, false);
    expect(out).toEqual([]);
  });

  it('a synced copy is quiet; a non-failover CDC slot with a standby streaming warns (--once exit 1)', () => {
    expect(poll([row({ slotName: 'outbox_slot', failover: true })], { primary: { physicalStandbys: 1, timeline: 1 }, standby: { target: 'sb', sample: standby([standbyRow({ slotName: 'outbox_slot' })]) } }).out).toEqual([]);
    const { out, statuses } = poll([row({ slotName: 'outbox_slot', failover: false })], { primary: { physicalStandbys: 1, timeline: 1 } });
    expect(out.map((n) => [n.rule, n.severity])).toEqual([['SlotFailoverDisabled', 'warning']]);
    expect(exitCodeFor(true, statuses)).toBe(1);
  });

  it('the connector slot missing while Connect holds an offset is SlotMissing named SLOT_MISSING_AFTER_FAILOVER', () => {
    const { out } = poll([], { primary: { physicalStandbys: 0, timeline: 2 }, connectorOffsetLsn: '0/5000' });
    expect(out.map((n) => [n.rule, n.severity])).toEqual([['SlotMissing', 'critical']]);
    expect(out[0]?.summary).toMatch(/^SLOT_MISSING_AFTER_FAILOVER: slot outbox_slot/);
    expect(out[0]?.summary).toContain('timeline 2');
    expect(out[0]?.values).toEqual({ code: 'SLOT_MISSING_AFTER_FAILOVER', storedOffsetLsn: '0/5000', timeline: 2 });
    const plain = poll([], { primary: { physicalStandbys: 0, timeline: 1 } }).out;
    expect(plain[0]?.summary).not.toContain('SLOT_MISSING_AFTER_FAILOVER');
  });
});

describe('watchdog.standby.databaseUrl', () => {
  it('becomes connection settings; the target and the printed config never carry the password', () => {
    const config = loadConfig({ env: { OUTBOX_WATCHDOG_STANDBY_DATABASE_URL: 'postgres://mon:s3cret@standby.test:55436/app?sslmode=require' } });
    const conn = standbyConnection(config);
    expect(conn?.target).toBe('standby.test:55436/app');
    expect(conn?.database).toMatchObject({ host: 'standby.test', port: 55436, database: 'app', user: 'mon', password: 's3cret', ssl: true });
    expect(JSON.stringify(redactConfig(config))).not.toContain('s3cret');
  });

  it("takes the watchdog's user and password where the URL has none, and is absent without the setting", () => {
    const config = loadConfig({ env: { OUTBOX_WATCHDOG_STANDBY_DATABASE_URL: 'postgres://standby.test/app', OUTBOX_WATCHDOG_USER: 'w', OUTBOX_WATCHDOG_PASSWORD: 'wp' } });
    expect(standbyConnection(config)?.database).toMatchObject({ user: 'w', password: 'wp', port: 5432 });
    expect(standbyConnection(loadConfig({ env: {} }))).toBeUndefined();
  });
});
