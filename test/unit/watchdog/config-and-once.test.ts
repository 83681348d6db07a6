import { loadConfig, redactConfig } from '../../../src/config';
import { exitCodeFor, renderOnce } from '../../../src/watchdog/once';
import { slotQuerySql, parseSlotRows } from '../../../src/watchdog/slot-query';
import { createSlotTracker } from '../../../src/watchdog/slot-tracker';
import { thrown } from '../../support/expect-error';
import { row, sample } from './fixtures';

describe('watchdog config', () => {
  it('defaults are the documented thresholds (docs/watchdog.md, "Rules")', () => {
    const wd = loadConfig({ env: {} }).watchdog;
    expect(wd).toMatchObject({ intervalMs: 15_000, statementTimeoutMs: 5_000, repeatIntervalMs: 4 * 3600_000, clearForMs: 600_000, clearRatioBytes: 0.9, clearRatioTime: 1.2 });
    expect(wd.rules).toMatchObject({
      retainedBytes: { warning: 5 * 1024 ** 3, critical: 20 * 1024 ** 3 },
      retainedPercentOfKeepSize: { warning: 25, critical: 50 },
      inactiveMs: { warning: 600_000, critical: 3_600_000 },
      stalledMs: { warning: 900_000, critical: 3_600_000 },
      invalidationEtaMs: { warning: 6 * 3600_000, critical: 3600_000 },
      diskFullEtaMs: { warning: 24 * 3600_000, critical: 4 * 3600_000 },
    });
  });

  it('reads OUTBOX_WATCHDOG_* and keeps the other threshold of a pair at its default', () => {
    const wd = loadConfig({ env: { OUTBOX_WATCHDOG_RETAINED_WARNING_BYTES: '1048576', OUTBOX_WATCHDOG_SLOTS: 'a, b', OUTBOX_WATCHDOG_INTERVAL_MS: '200' } }).watchdog;
    expect(wd.rules.retainedBytes).toEqual({ warning: 1048576, critical: 20 * 1024 ** 3 });
    expect(wd.slots).toEqual(['a', 'b']);
    expect(wd.intervalMs).toBe(200);
  });

  it('a malformed threshold names the setting, the env var and the bad value', () => {
    const error = thrown(() => loadConfig({ env: { OUTBOX_WATCHDOG_RETAINED_WARNING_BYTES: '5GB' } }));
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('watchdog.rules.retainedBytes.warning (from OUTBOX_WATCHDOG_RETAINED_WARNING_BYTES): retainedBytes.warning: a number of bytes — got "5GB"');
  });

  it('warning must come before critical', () => {
    const error = thrown(() => loadConfig({ env: {}, overrides: { watchdog: { rules: { inactiveMs: { warning: 10, critical: 5 } } } } }));
    expect(error.message).toMatch(/inactiveMs.warning must not exceed inactiveMs.critical/);
  });

  it('a bad webhook secret is explained without echoing it; secrets are redacted', () => {
    const error = thrown(() => loadConfig({ env: { OUTBOX_WATCHDOG_WEBHOOK_SECRET: 'hunter2-not-base64!' } }));
    expect(error.message).toMatch(/webhookSecret.*whsec_.*openssl rand -base64 32/);
    expect(error.message).not.toContain('hunter2');
    const secret = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
    const config = loadConfig({ env: { OUTBOX_WATCHDOG_WEBHOOK_SECRET: secret, OUTBOX_WATCHDOG_SLACK_WEBHOOK_SECRET_URL: 'https://hooks.slack.com/services/T/B/tok', OUTBOX_WATCHDOG_PASSWORD: 'pw' } });
    const shown = JSON.stringify(redactConfig(config));
    expect(shown).not.toContain(secret);
    expect(shown).not.toContain('/services/T/B/tok');
    expect(shown).not.toContain('"pw"');
  });

  it('a webhook URL must be http(s)', () => {
    expect(thrown(() => loadConfig({ env: { OUTBOX_WATCHDOG_WEBHOOK_URL: 'ftp://x' } })).message).toMatch(/watchdog.webhookUrl.*http/);
  });
});

describe('slot query', () => {
  it('selects NULL for columns a version lacks', () => {
    expect(slotQuerySql(130000)).toMatch(/NULL::boolean AS two_phase/);
    expect(slotQuerySql(130000)).toMatch(/s\.wal_status AS wal_status/);
    expect(slotQuerySql(150000)).toMatch(/s\.two_phase AS two_phase/);
    expect(slotQuerySql(150000)).toMatch(/NULL::boolean AS conflicting/);
    expect(slotQuerySql(160000)).toMatch(/s\.conflicting AS conflicting/);
    expect(slotQuerySql(160000)).toMatch(/NULL::text AS invalidation_reason/);
    expect(slotQuerySql(170000)).toMatch(/s\.invalidation_reason AS invalidation_reason/);
    expect(slotQuerySql(180000)).toMatch(/s\.synced AS synced/);
    for (const v of [130000, 170000]) expect(slotQuerySql(v)).toMatch(/pg_is_in_recovery\(\)\s+THEN GREATEST\(pg_last_wal_receive_lsn\(\), pg_last_wal_replay_lsn\(\)\)/);
  });
  it('parses a server without slots', () => {
    const s = parseSlotRows([{ slot_name: null, in_recovery: false, cur_lsn: '0/10', cur_pos: '16', sampled_at_ms: 5 }]);
    expect(s).toEqual({ sampledAtMs: 5, inRecovery: false, currentLsn: '0/10', currentPos: 16, slots: [] });
  });
});

describe('--once', () => {
  it('exit codes: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN', () => {
    expect(exitCodeFor(true, [])).toBe(0);
    expect(exitCodeFor(true, [{ rule: 'SlotInactive', slot: 's', level: 'warning', summary: '' }])).toBe(1);
    expect(exitCodeFor(true, [{ rule: 'SlotInactive', slot: 's', level: 'warning', summary: '' }, { rule: 'SlotInvalidated', slot: 's', level: 'critical', summary: '' }])).toBe(2);
    expect(exitCodeFor(false, [{ rule: 'SlotInactive', slot: 's', level: 'critical', summary: '' }])).toBe(3);
  });
  it('prints a table of slots and the alerts', () => {
    const tracked = createSlotTracker({ rateWindowMs: 1000, stalledMinWalBytes: 1, walDiskBudgetBytes: 0 }).track(sample(0, 0, [row({ retainedBytes: 3 * 1024 ** 3 })]));
    const text = renderOnce('c1', tracked, [{ rule: 'SlotRetainedHigh', slot: 's1', level: 'warning', summary: 'Slot s1 retains 3.0 GiB' }]);
    expect(text).toMatch(/^SLOT WATCHDOG WARNING — c1, 1 slot\(s\)/);
    expect(text).toMatch(/│ s1 +│ logical/);
    expect(text).toContain('3.0 GiB');
    expect(text).toContain('WARNING SlotRetainedHigh [s1]: Slot s1 retains 3.0 GiB');
  });
});
