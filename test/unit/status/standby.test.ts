/** src/status: the standby's failover-slot readiness in `outbox status` (watchdog.standby.databaseUrl). Pure. */
import { computeVerdict, renderStatus, type StatusReport } from '../../../src/status';
import { healthy } from './fixtures';

const withStandby = (standby: Extract<StatusReport['slots'], { ok: true }>['standby']): StatusReport => {
  const s = healthy();
  if (!s.slots.ok) throw new Error('fixture');
  s.slots.standby = standby;
  return { ...s, verdict: computeVerdict(s) };
};

describe('outbox status: standby failover slots', () => {
  it('says `not configured` without the setting, and changes nothing else', () => {
    const s = withStandby({ configured: false });
    expect(renderStatus(s, { color: false })).toContain('Standby failover slots: not configured (watchdog.standby.databaseUrl)');
    expect(s.verdict.level).toBe('OK');
  });

  it('shows each failover slot: readiness, synced, temporary, invalidation_reason and how far it trails', () => {
    const s = withStandby({
      configured: true,
      target: 'standby:55436/app',
      inRecovery: true,
      slots: [
        { slotName: 'outbox_slot', readiness: 'ready', synced: true, temporary: false, invalidationReason: null, lagBytes: 2048 },
        { slotName: 'other', readiness: 'invalidated', synced: true, temporary: false, invalidationReason: 'wal_removed', lagBytes: null },
      ],
    });
    const out = renderStatus(s, { color: false });
    expect(out).toContain('Standby failover slots at standby:55436/app');
    expect(out).toMatch(/│ outbox_slot +│ ready +│ true +│ false +│ - +│ 2\.0 KiB +│/);
    expect(out).toMatch(/│ other +│ invalidated +│ true +│ false +│ wal_removed +│ - +│/);
    expect(s.verdict.level).toBe('CRITICAL');
    expect(s.verdict.reasons.map((r) => r.message).join('\n')).toContain('failover slot other is not ready on the standby standby:55436/app (invalidated)');
  });

  it('an unreadable standby is a warning with the reason, not a failed section', () => {
    const s = withStandby({ configured: true, target: 'standby:55436/app', error: 'connect ECONNREFUSED', slots: [] });
    expect(renderStatus(s, { color: false })).toContain('unreadable: connect ECONNREFUSED');
    expect(s.verdict.level).toBe('WARNING');
  });
});
