import { Registry } from 'prom-client';
import { createAlertEngine, dedupKey } from '../../../src/watchdog/alert-engine';
import { createWatchdogMetrics } from '../../../src/watchdog/metrics';
import type { OutboxTableSample } from '../../../src/watchdog/outbox-query';
import { evaluateOutboxRule } from '../../../src/watchdog/outbox-rules';
import { renderOnce } from '../../../src/watchdog/once';
import { alertmanagerPayload, slackPayload } from '../../../src/watchdog/payloads';
import { createSlotTracker } from '../../../src/watchdog/slot-tracker';
import { sample, wdConfig } from './fixtures';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

function outbox(over: Partial<OutboxTableSample> = {}): OutboxTableSample {
  return {
    table: 'public.outbox',
    present: true,
    estimatedRows: 1000,
    totalBytes: 10 * MiB,
    deadTuples: 10,
    lastAutovacuumMs: Date.UTC(2026, 0, 2),
    lastVacuumMs: null,
    oldestPendingAgeSeconds: 0,
    pendingRows: null,
    pendingCapped: false,
    pendingError: null,
    sampledAtMs: 0,
    partitionHeadroomSeconds: null,
    ...over,
  };
}

describe('outbox rules', () => {
  const config = wdConfig();

  it('OutboxPartitionsRunningOut: a partitioned outbox warns below half the windows the cleanup keeps ahead, and is critical below one window', () => {
    const partitioning = { seconds: 3600, ahead: 24 };
    const level = (hours: number | null, current: 'ok' | 'warning' | 'critical' = 'ok') =>
      evaluateOutboxRule('OutboxPartitionsRunningOut', outbox({ partitionHeadroomSeconds: hours === null ? null : hours * 3600 }), config, current, partitioning);
    expect([level(null).level, level(24).level, level(12.5).level, level(12).level, level(2).level, level(1).level, level(0).level]).toEqual(['ok', 'ok', 'ok', 'warning', 'warning', 'critical', 'critical']);
    // Back above the thresholds, the alert clears.
    expect(level(23, 'critical').level).toBe('ok');
    expect(level(0.5).summary).toMatch(/partitions for the next 30m.*every outbox INSERT fails.*outbox:cleanup --once/);
    // Few windows ahead (a test's 2 windows of 5 s): warning from one window down, never below it.
    expect(evaluateOutboxRule('OutboxPartitionsRunningOut', outbox({ partitionHeadroomSeconds: 7 }), config, 'ok', { seconds: 5, ahead: 2 }).level).toBe('ok');
  });

  it('defaults: backlog age warns at 15 min and is critical at 1 h; size warns at 1 GiB and is critical at 10 GiB', () => {
    expect(config.rules.outboxBacklogAgeMs).toEqual({ warning: 15 * 60_000, critical: 60 * 60_000 });
    expect(config.rules.outboxTableBytes).toEqual({ warning: GiB, critical: 10 * GiB });
    expect(config.watchOutbox).toBe(true);
    const age = (s: number) => evaluateOutboxRule('OutboxBacklogAge', outbox({ oldestPendingAgeSeconds: s }), config, 'ok').level;
    expect([age(0), age(14 * 60), age(15 * 60), age(59 * 60), age(3600)]).toEqual(['ok', 'ok', 'warning', 'warning', 'critical']);
    const size = (b: number) => evaluateOutboxRule('OutboxTableSize', outbox({ totalBytes: b }), config, 'ok').level;
    expect([size(MiB), size(GiB), size(10 * GiB)]).toEqual(['ok', 'warning', 'critical']);
  });

  it('the size clears only below clearRatioBytes of the threshold once firing (hysteresis on the value)', () => {
    const at = (b: number, current: 'ok' | 'warning') => evaluateOutboxRule('OutboxTableSize', outbox({ totalBytes: b }), config, current).level;
    expect(at(0.95 * GiB, 'ok')).toBe('ok');
    expect(at(0.95 * GiB, 'warning')).toBe('warning');
    expect(at(0.85 * GiB, 'warning')).toBe('ok');
  });

  it('no verdict when the table is missing or its waiting rows cannot be read: the alert keeps its state', () => {
    expect(evaluateOutboxRule('OutboxTableSize', outbox({ present: false, totalBytes: null }), config, 'warning').level).toBeUndefined();
    const unreadable = evaluateOutboxRule('OutboxBacklogAge', outbox({ oldestPendingAgeSeconds: null, pendingError: 'permission denied' }), config, 'critical');
    expect(unreadable.level).toBeUndefined();
    expect(unreadable.summary).toContain('permission denied');
    // the size is still judged when only the waiting rows are unreadable
    expect(evaluateOutboxRule('OutboxTableSize', outbox({ oldestPendingAgeSeconds: null, pendingError: 'x', totalBytes: 2 * GiB }), config, 'ok').level).toBe('warning');
  });

  it('the engine fires after hold-for, resolves after clear-for, per table with no slot, and ignores polls without an outbox sample', () => {
    const cfg = wdConfig({ clearForMs: 1_000, repeatIntervalMs: 0, rules: { outboxBacklogAgeMs: { warning: 60_000, critical: 120_000 }, outboxBacklogAgeForMs: 2_000 } });
    let clock = 0;
    const engine = createAlertEngine({ config: cfg, cluster: 'c1', now: () => clock });
    const tracker = createSlotTracker({ rateWindowMs: cfg.rateWindowMs, stalledMinWalBytes: cfg.rules.stalledMinWalBytes, walDiskBudgetBytes: 0 });
    const poll = (t: number, o?: OutboxTableSample) => {
      clock = t;
      return engine.evaluate(tracker.track(sample(t, 0, [])), null, undefined, o).filter((n) => n.rule.startsWith('Outbox'));
    };
    expect(poll(0, outbox({ oldestPendingAgeSeconds: 90 }))).toEqual([]);
    expect(poll(1_000, outbox({ oldestPendingAgeSeconds: 91 }))).toEqual([]);
    const fired = poll(2_000, outbox({ oldestPendingAgeSeconds: 92 }));
    expect(fired.map((n) => [n.rule, n.event, n.severity])).toEqual([['OutboxBacklogAge', 'firing', 'warning']]);
    expect(fired[0]?.slot).toBeNull();
    expect(fired[0]?.dedupKey).toBe(dedupKey('c1', null, 'OutboxBacklogAge'));
    expect(fired[0]?.values).toMatchObject({ table: 'public.outbox', oldestPendingAgeSeconds: 92 });
    expect(engine.statuses()).toEqual([expect.objectContaining({ rule: 'OutboxBacklogAge', slot: null, level: 'warning' })]);
    // sampling off or failed: nothing changes
    expect(poll(3_000)).toEqual([]);
    expect(poll(4_000, outbox({ oldestPendingAgeSeconds: 0 }))).toEqual([]);
    const resolved = poll(5_000, outbox({ oldestPendingAgeSeconds: 0 }));
    expect(resolved.map((n) => [n.rule, n.event, n.severity])).toEqual([['OutboxBacklogAge', 'resolved', 'warning']]);
  });

  it('receivers name the table', () => {
    const cfg = wdConfig({ rules: { outboxTableBytes: { warning: 1, critical: 2 * GiB }, outboxTableSizeForMs: 0 } });
    const engine = createAlertEngine({ config: cfg, cluster: 'c1', now: () => 0 });
    const tracker = createSlotTracker({ rateWindowMs: cfg.rateWindowMs, stalledMinWalBytes: cfg.rules.stalledMinWalBytes, walDiskBudgetBytes: 0 });
    const [n] = engine.evaluate(tracker.track(sample(0, 0, [])), null, undefined, outbox()).filter((x) => x.rule === 'OutboxTableSize');
    expect(n).toBeDefined();
    expect(alertmanagerPayload([n!], 'http://runbook', 60_000)[0]?.labels).toMatchObject({ alertname: 'OutboxTableSize', table: 'public.outbox', severity: 'warning' });
    expect(slackPayload(n!, 'http://runbook').text).toContain('table `public.outbox` on c1');
  });
});

describe('outbox gauges', () => {
  it('set each value, and drop a value not read instead of keeping it stale', async () => {
    const metrics = createWatchdogMetrics('c1', new Registry());
    const value = async (name: string) => (await metrics.registry.getSingleMetric(name)?.get())?.values.map((v) => [v.labels, v.value]);
    metrics.recordOutbox(outbox({ oldestPendingAgeSeconds: 42, lastAutovacuumMs: 1_700_000_000_000 }));
    expect(await value('outbox_table_bytes')).toEqual([[{ cluster: 'c1', table: 'public.outbox' }, 10 * MiB]]);
    expect(await value('outbox_table_rows')).toEqual([[{ cluster: 'c1', table: 'public.outbox' }, 1000]]);
    expect(await value('outbox_table_dead_tuples')).toEqual([[{ cluster: 'c1', table: 'public.outbox' }, 10]]);
    expect(await value('outbox_table_last_autovacuum_timestamp_seconds')).toEqual([[{ cluster: 'c1', table: 'public.outbox' }, 1_700_000_000]]);
    expect(await value('outbox_table_last_vacuum_timestamp_seconds')).toEqual([]);
    expect(await value('outbox_oldest_pending_age_seconds')).toEqual([[{ cluster: 'c1', table: 'public.outbox' }, 42]]);
    metrics.recordOutbox(outbox({ oldestPendingAgeSeconds: null, pendingError: 'denied' }));
    expect(await value('outbox_oldest_pending_age_seconds')).toEqual([]);
    expect(await value('outbox_table_bytes')).toHaveLength(1);
    metrics.recordOutbox(undefined);
    expect(await value('outbox_table_bytes')).toEqual([]);
  });
});

describe('--once', () => {
  it('prints one line for the outbox table, the unreadable age with its reason', () => {
    expect(renderOnce('c1', undefined, [], undefined, outbox({ oldestPendingAgeSeconds: 7200 }))).toContain(
      'outbox public.outbox: 10.0 MiB with indexes, ~1000 rows, 10 dead; oldest row with published_at IS NULL: 2.0h',
    );
    expect(renderOnce('c1', undefined, [], undefined, outbox({ oldestPendingAgeSeconds: null, pendingError: 'no grant' }))).toContain('unreadable (no grant)');
    expect(renderOnce('c1', undefined, [], undefined, outbox({ present: false }))).not.toContain('outbox public.outbox');
  });
});
