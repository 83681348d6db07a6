import { computeVerdict, renderStatus, type StatusReport } from '../../../src/status';
import { healthy, slot } from './fixtures';

const withVerdict = (s: StatusReport): StatusReport => ({ ...s, verdict: computeVerdict(s) });
const ESC = '\u001b[';

describe('renderStatus', () => {
  it('puts the verdict first, then a block per section, without colours unless asked', () => {
    const out = renderStatus(withVerdict(healthy()), { color: false });
    expect(out.split('\n')[0]).toBe('OK  outbox status at 2026-01-02T03:04:05.000Z (exit code 0)');
    expect(out).not.toContain(ESC);
    const order = ['Stack (local ports, this machine)', 'Connector outbox-connector at http://127.0.0.1:8083', 'Replication slots', 'Consumer groups', 'DLQ', 'Watchdog'].map((t) =>
      out.indexOf(t),
    );
    expect(order.every((i) => i > 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(out).toContain('watchdog not running');
  });

  it('shows states in tables: services, tasks, slots with pretty bytes, lag per topic, DLQ depth', () => {
    const s = healthy();
    if (!s.slots.ok || !s.dlq.ok) throw new Error('fixture');
    s.slots.slots.push(slot({ name: 'old_slot', configured: false, active: false, walStatus: 'extended', retainedBytes: 3 * 2 ** 30, safeWalSizeBytes: 512 * 2 ** 20 }));
    s.dlq.topics = [{ topic: 'outbox.dlq.order', partitions: 2, depth: 7, retentionMs: -1 }];
    const out = renderStatus(withVerdict(s), { color: false });
    expect(out).toMatch(/│ postgres +│ ready +│ 100 +│ 55432 +│ 100\.0 MiB +│ PostgreSQL 16\.4/);
    expect(out).toMatch(/│ task 0 +│ RUNNING +│ 127\.0\.0\.1:8083/);
    expect(out).toMatch(/│ outbox_slot +│ active +│ reserved +│ 1\.5 KiB +│ 0 B +│ unlimited +│ pgoutput \/ app/);
    expect(out).toMatch(/│ old_slot \(other\) +│ INACTIVE +│ extended +│ 3\.0 GiB +│ 0 B +│ 512\.0 MiB/);
    expect(out).toMatch(/│ outbox-router +│ Stable +│ 1 \(outbox-router-router@127\.0\.0\.1\) +│ outbox\.event\.order +│ 3 +│/);
    expect(out).toMatch(/│ outbox\.dlq\.order +│ 2 +│ 7 +│/);
    expect(out.split('\n')[0]).toMatch(/^WARNING /);
    expect(out).toContain('  WARNING  DLQ outbox.dlq.order holds 7 records');
  });

  it('renders an unreachable section as "unreachable: <reason>" and still renders the others', () => {
    const s = healthy();
    s.connector = { ok: false, ms: 3000, error: 'no answer within 3000 ms (--timeout). Check that Kafka Connect answers at http://10.0.0.1:8083.' };
    const out = renderStatus(withVerdict(s), { color: false });
    expect(out).toContain('Connector\n  unreachable: no answer within 3000 ms (--timeout). Check that Kafka Connect answers at http://10.0.0.1:8083.');
    expect(out).toContain('│ outbox_slot');
    expect(out.split('\n')[0]).toMatch(/^WARNING /);
  });

  it('shows the head of a FAILED task trace and a not-deployed connector', () => {
    const failed = healthy();
    if (!failed.connector.ok) throw new Error('fixture');
    failed.connector.tasks = [{ id: 0, state: 'FAILED', worker: 'w1:8083', trace: 'org.apache.kafka.connect.errors.ConnectException: slot is active' }];
    expect(renderStatus(withVerdict(failed), { color: false })).toMatch(/│ task 0 +│ FAILED +│ w1:8083 +│ org\.apache\.kafka\.connect\.errors\.ConnectException: slot is active/);

    const absent = healthy();
    if (!absent.connector.ok) throw new Error('fixture');
    absent.connector.deployed = false;
    const out = renderStatus(withVerdict(absent), { color: false });
    expect(out).toContain('not deployed (deploy it with `outbox connector:deploy`)');
    expect(out.split('\n')[1]).toBe('  CRITICAL connector outbox-connector is not deployed');
  });

  it('says "not the local stack" and shows the watchdog health body with firing alerts', () => {
    const s = healthy();
    s.stack = { ok: true, ms: 1, local: false, note: 'not the local stack: the configuration points at other hosts', services: [] };
    s.watchdog = { ok: true, ms: 2, url: 'http://127.0.0.1:9465', running: true, httpStatus: 200, health: { status: 'ok', alerts: { SlotLag: 'firing' } }, firing: ['SlotLag'] };
    const out = renderStatus(withVerdict(s), { color: false });
    expect(out).toContain('Stack\n  not the local stack: the configuration points at other hosts');
    expect(out).toContain('Watchdog at http://127.0.0.1:9465: /healthz HTTP 200, firing: SlotLag');
    expect(out).toContain('    "SlotLag": "firing"');
  });

  it('colours states when asked: green RUNNING, red FAILED and CRITICAL', () => {
    const s = healthy();
    if (!s.connector.ok) throw new Error('fixture');
    s.connector.tasks = [{ id: 0, state: 'FAILED', worker: 'w', trace: null }];
    const out = renderStatus(withVerdict(s), { color: true });
    expect(out.startsWith(`${ESC}31mCRITICAL${ESC}39m`)).toBe(true);
    expect(out).toContain(`${ESC}32mRUNNING${ESC}39m`);
    expect(out).toContain(`${ESC}31mFAILED${ESC}39m`);
  });

  it('stays JSON-serialisable: a report survives a JSON round trip unchanged', () => {
    const s = withVerdict(healthy());
    expect(JSON.parse(JSON.stringify(s))).toEqual(s);
  });

  it('shows DLQ retention and the parked keys with their head event, bounded by the limit', () => {
    const s = healthy();
    if (!s.dlq.ok || !s.parked.ok) throw new Error('fixture');
    s.dlq.topics = [
      { topic: 'outbox.dlq.order', partitions: 1, depth: 0, retentionMs: 604_800_000 },
      { topic: 'outbox.dlq.invoice', partitions: 1, depth: 0, retentionMs: -1 },
    ];
    Object.assign(s.parked, {
      totalKeys: 4,
      totalEvents: 9,
      oldestSince: '2026-01-01T00:00:00.000Z',
      limit: 2,
      keys: [
        { consumer: 'billing', aggregateType: 'order', aggregateId: 'o-1', events: 5, headEventId: 'e-1', headErrorCode: 'HANDLER_FAILED', since: '2026-01-01T00:00:00.000Z' },
        { consumer: 'billing', aggregateType: 'order', aggregateId: 'o-2', events: 2, headEventId: 'e-7', headErrorCode: 'DECODE_FAILED', since: '2026-01-02T00:00:00.000Z' },
      ],
    });
    const out = renderStatus(s, { color: false });
    expect(out).toMatch(/│ outbox\.dlq\.order +│ 1 +│ 0 +│ 7 d +│/);
    expect(out).toMatch(/│ outbox\.dlq\.invoice +│ 1 +│ 0 +│ forever +│/);
    expect(out).toContain('Parked keys ("public"."inbox_parked"; 4 keys, 9 events; the most events first)');
    expect(out).toMatch(/│ billing +│ order +│ o-1 +│ 5 +│ e-1 +│ HANDLER_FAILED +│ 2026-01-01T00:00:00\.000Z +│/);
    expect(out).toContain('… and 2 more key(s) (--parked-limit, --json)');

    const none = healthy();
    expect(renderStatus(none, { color: false })).toContain('Parked keys ("public"."inbox_parked")\n  none');
  });
});
