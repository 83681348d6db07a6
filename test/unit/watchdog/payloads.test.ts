import type { AlertNotification } from '../../../src/watchdog/alert-engine';
import { WEBHOOK_SCHEMA, alertmanagerPayload, genericPayload, slackPayload } from '../../../src/watchdog/payloads';

const n = (over: Partial<AlertNotification> = {}): AlertNotification => ({
  id: 'msg_1', dedupKey: 'k', event: 'firing', status: 'firing', severity: 'critical', previousSeverity: null, rule: 'SlotRetainedHigh', cluster: 'db:5432',
  slot: { name: 'outbox_slot', type: 'logical', database: 'app', plugin: 'pgoutput' }, summary: 'Slot outbox_slot retains 21 GiB', startsAt: '2026-01-01T00:00:00.000Z',
  endsAt: null, at: '2026-01-01T00:05:00.000Z', values: { retainedBytes: 21, active: false, walStatus: null },
  ...over,
});

describe('payloads', () => {
  it('generic webhook: the documented fields', () => {
    const body = genericPayload(n(), 'https://runbook');
    expect(Object.keys(body).sort()).toEqual(['at', 'cluster', 'dedupKey', 'endsAt', 'event', 'id', 'previousSeverity', 'rule', 'runbookUrl', 'schema', 'severity', 'slot', 'startsAt', 'status', 'summary', 'values'].sort());
    expect(body.schema).toBe(WEBHOOK_SCHEMA);
  });

  it('Slack: text fallback and blocks', () => {
    const s = slackPayload(n(), 'https://runbook');
    expect(s.text).toMatch(/^\[CRITICAL\] SlotRetainedHigh slot `outbox_slot` on db:5432: Slot outbox_slot retains/);
    expect(JSON.stringify(s.blocks)).toContain(':red_circle:');
    expect(JSON.stringify(s.blocks)).toContain('<https://runbook|runbook>');
    expect(slackPayload(n({ status: 'resolved', event: 'resolved' }), 'x').text).toMatch(/^\[RESOLVED\]/);
  });

  it('Alertmanager: labels, endsAt in the future while firing, now when resolved', () => {
    const [firing] = alertmanagerPayload([n()], 'https://runbook', 240_000);
    expect(firing).toMatchObject({
      labels: { alertname: 'SlotRetainedHigh', cluster: 'db:5432', slot_name: 'outbox_slot', database: 'app', slot_type: 'logical', severity: 'critical', dedup_key: 'k', service: 'outbox-watchdog' },
      annotations: { summary: 'Slot outbox_slot retains 21 GiB', runbook_url: 'https://runbook' },
      startsAt: '2026-01-01T00:00:00.000Z',
      endsAt: '2026-01-01T00:09:00.000Z',
      generatorURL: 'https://runbook',
    });
    const [resolved] = alertmanagerPayload([n({ status: 'resolved', event: 'resolved', endsAt: '2026-01-01T00:06:00.000Z' })], 'r', 1);
    expect(resolved?.endsAt).toBe('2026-01-01T00:06:00.000Z');
  });

  it('Alertmanager: an escalation also ends the previous severity’s alert', () => {
    const out = alertmanagerPayload([n({ event: 'escalated', previousSeverity: 'warning' })], 'r', 60_000);
    expect(out.map((a) => [a.labels.severity, a.endsAt])).toEqual([
      ['critical', '2026-01-01T00:06:00.000Z'],
      ['warning', '2026-01-01T00:05:00.000Z'],
    ]);
  });

  it('dropped: annotated so it is not mistaken for a resolution', () => {
    const [a] = alertmanagerPayload([n({ status: 'dropped', event: 'dropped', endsAt: '2026-01-01T00:05:00.000Z' })], 'r', 1);
    expect(a?.annotations.ended_because).toBe('slot_dropped');
  });
});
