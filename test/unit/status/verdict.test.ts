import { computeVerdict, type StatusReport } from '../../../src/status';
import { group, healthy, slot } from './fixtures';

const verdictOf = (status: StatusReport) => computeVerdict(status);
const messages = (status: StatusReport) => verdictOf(status).reasons.map((r) => `${r.level} ${r.message}`);

describe('computeVerdict', () => {
  it('is OK with exit code 0 when nothing is wrong', () => {
    expect(verdictOf(healthy())).toEqual({ level: 'OK', exitCode: 0, reasons: [] });
  });

  it('is CRITICAL (exit 2) when the connector is not deployed', () => {
    const s = healthy();
    if (!s.connector.ok) throw new Error('fixture');
    s.connector.deployed = false;
    s.connector.state = null;
    s.connector.tasks = [];
    expect(verdictOf(s)).toMatchObject({ level: 'CRITICAL', exitCode: 2 });
    expect(messages(s)).toEqual(['CRITICAL connector outbox-connector is not deployed']);
  });

  it('is CRITICAL for a FAILED task, WARNING for a PAUSED connector', () => {
    const failed = healthy();
    if (!failed.connector.ok) throw new Error('fixture');
    failed.connector.tasks = [{ id: 0, state: 'FAILED', worker: 'w1:8083', trace: 'org.apache.kafka.connect.errors.ConnectException: boom' }];
    expect(messages(failed)).toEqual(['CRITICAL connector outbox-connector task 0 is FAILED on w1:8083']);

    const paused = healthy();
    if (!paused.connector.ok) throw new Error('fixture');
    paused.connector.state = 'PAUSED';
    paused.connector.tasks = [{ id: 0, state: 'PAUSED', worker: 'w1:8083', trace: null }];
    expect(verdictOf(paused)).toMatchObject({ level: 'WARNING', exitCode: 1 });
    expect(messages(paused)).toEqual([
      'WARNING connector outbox-connector is PAUSED, not RUNNING',
      'WARNING connector outbox-connector task 0 is PAUSED, not RUNNING',
    ]);
  });

  it('warns about a RUNNING connector without tasks', () => {
    const s = healthy();
    if (!s.connector.ok) throw new Error('fixture');
    s.connector.tasks = [];
    expect(messages(s)).toEqual(['WARNING connector outbox-connector is RUNNING without tasks']);
  });

  it('is CRITICAL when the configured slot is inactive, missing, unreserved or lost; WARNING for extended', () => {
    const inactive = healthy();
    if (!inactive.slots.ok) throw new Error('fixture');
    inactive.slots.slots = [slot({ active: false, activePid: null })];
    expect(messages(inactive)).toEqual(['CRITICAL replication slot outbox_slot is inactive']);

    const missing = healthy();
    if (!missing.slots.ok) throw new Error('fixture');
    missing.slots.found = false;
    missing.slots.slots = [];
    expect(messages(missing)).toEqual(['CRITICAL replication slot outbox_slot does not exist']);

    for (const walStatus of ['unreserved', 'lost']) {
      const s = healthy();
      if (!s.slots.ok) throw new Error('fixture');
      s.slots.slots = [slot({ walStatus })];
      expect(messages(s)).toEqual([`CRITICAL replication slot outbox_slot has wal_status ${walStatus}`]);
    }

    const extended = healthy();
    if (!extended.slots.ok) throw new Error('fixture');
    extended.slots.slots = [slot({ walStatus: 'extended' })];
    expect(verdictOf(extended).level).toBe('WARNING');
  });

  it('only warns about an inactive slot that is not the connector\'s, and flags it as other', () => {
    const s = healthy();
    if (!s.slots.ok) throw new Error('fixture');
    s.slots.slots.push(slot({ name: 'old_slot', configured: false, active: false, activePid: null }));
    expect(verdictOf(s).level).toBe('WARNING');
    expect(messages(s)).toEqual(['WARNING other logical slot old_slot is inactive and retains WAL (drop it if nothing uses it)']);
  });

  it('warns when a group lags more than --lag-warn records on a topic, not at the threshold', () => {
    const atLimit = healthy();
    if (!atLimit.consumerGroups.ok) throw new Error('fixture');
    atLimit.options.lagWarn = 3;
    expect(verdictOf(atLimit).level).toBe('OK');
    atLimit.options.lagWarn = 2;
    expect(messages(atLimit)).toEqual(['WARNING consumer group outbox-router lags 3 records on outbox.event.order (over --lag-warn 2)']);
  });

  it('warns about a missing group only when --group named it', () => {
    const s = healthy();
    if (!s.consumerGroups.ok) throw new Error('fixture');
    s.consumerGroups.groups = [group({ state: 'Dead', members: 0, clients: [], totalLag: 0, topics: [] })];
    expect(verdictOf(s).level).toBe('OK');
    s.options.groupsGiven = true;
    expect(messages(s)).toEqual(['WARNING consumer group outbox-router does not exist (no members, no committed offsets)']);
  });

  it('warns when a DLQ holds records', () => {
    const s = healthy();
    if (!s.dlq.ok) throw new Error('fixture');
    s.dlq.topics = [{ topic: 'outbox.dlq.order', partitions: 3, depth: 1, retentionMs: -1 }, { topic: 'outbox.dlq.invoice', partitions: 1, depth: 4, retentionMs: -1 }];
    expect(messages(s)).toEqual(['WARNING DLQ outbox.dlq.order holds 1 record', 'WARNING DLQ outbox.dlq.invoice holds 4 records']);
  });

  it('warns about an unreadable section with the head of its error, and does not fail the rest', () => {
    const s = healthy();
    s.connector = { ok: false, ms: 3000, error: 'Kafka Connect at http://127.0.0.1:1 is not reachable (ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:1). Start the local stack.' };
    const v = verdictOf(s);
    expect(v).toMatchObject({ level: 'WARNING', exitCode: 1 });
    expect(v.reasons).toEqual([
      { level: 'WARNING', message: 'connector: could not be checked (Kafka Connect at http://127.0.0.1:1 is not reachable (ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:1))' },
    ]);
  });

  it('warns about local stack services stopped or not ready, and ignores a stack that is not local', () => {
    const s = healthy();
    if (!s.stack.ok) throw new Error('fixture');
    const [pg, kafka] = s.stack.services;
    if (!pg || !kafka) throw new Error('fixture');
    pg.ready = false;
    pg.detail = 'ECONNREFUSED';
    kafka.running = false;
    kafka.ready = false;
    expect(messages(s)).toEqual(['WARNING stack: postgres is running but not ready (ECONNREFUSED)', 'WARNING stack: kafka is not running']);
    s.stack = { ok: true, ms: 1, local: false, note: 'not the local stack', services: [] };
    expect(verdictOf(s).level).toBe('OK');
  });

  it('warns about firing watchdog alerts, and about an unhealthy /healthz without them', () => {
    const s = healthy();
    s.watchdog = { ok: true, ms: 2, url: 'http://127.0.0.1:9465', running: true, httpStatus: 503, health: {}, firing: ['SlotInactive'] };
    expect(messages(s)).toEqual(['WARNING watchdog: 1 alert(s) firing: SlotInactive']);
    s.watchdog.firing = [];
    expect(messages(s)).toEqual(['WARNING watchdog: /healthz answered HTTP 503']);
    s.watchdog.httpStatus = 200;
    expect(verdictOf(s).level).toBe('OK');
  });

  it('lists CRITICAL reasons before WARNING ones and takes the worst level', () => {
    const s = healthy();
    if (!s.dlq.ok || !s.slots.ok) throw new Error('fixture');
    s.dlq.topics = [{ topic: 'outbox.dlq.order', partitions: 1, depth: 2, retentionMs: -1 }];
    s.slots.slots = [slot({ walStatus: 'lost', active: false })];
    const v = verdictOf(s);
    expect(v.level).toBe('CRITICAL');
    expect(v.exitCode).toBe(2);
    expect(v.reasons.map((r) => r.level)).toEqual(['CRITICAL', 'CRITICAL', 'WARNING']);
  });

  it('warns about a DLQ topic that lets dead letters expire (retention.ms not -1), not about one that keeps them', () => {
    const s = healthy();
    if (!s.dlq.ok) throw new Error('fixture');
    s.dlq.topics = [
      { topic: 'outbox.dlq.order', partitions: 1, depth: 0, retentionMs: 604_800_000 },
      { topic: 'outbox.dlq.invoice', partitions: 1, depth: 0, retentionMs: -1 },
      { topic: 'outbox.dlq.unreadable', partitions: 1, depth: 0, retentionMs: null },
    ];
    expect(verdictOf(s)).toMatchObject({ level: 'WARNING', exitCode: 1 });
    expect(messages(s)).toEqual([
      'WARNING DLQ outbox.dlq.order deletes dead letters after 7 d (retention.ms=604800000): ' +
        'keep them with `kafka-configs.sh --alter --entity-type topics --entity-name outbox.dlq.order --add-config retention.ms=-1`',
    ]);
  });

  it('warns about parked keys with their totals and since when', () => {
    const s = healthy();
    if (!s.parked.ok) throw new Error('fixture');
    Object.assign(s.parked, { totalKeys: 3, totalEvents: 7, oldestSince: '2026-01-01T00:00:00.000Z' });
    expect(messages(s)).toEqual([
      'WARNING 3 keys parked in "public"."inbox_parked" (7 events, the longest since 2026-01-01T00:00:00.000Z): their events go to the DLQ until `outbox dlq:replay` applies them',
    ]);
    const unprovisioned = healthy();
    if (!unprovisioned.parked.ok) throw new Error('fixture');
    unprovisioned.parked.provisioned = false;
    expect(verdictOf(unprovisioned).level).toBe('OK');
  });

  it('warns about parked keys only past --parked-warn-keys, or past --parked-warn-age-ms whatever their number', () => {
    const s = healthy();
    if (!s.parked.ok) throw new Error('fixture');
    Object.assign(s.parked, { totalKeys: 3, totalEvents: 7, oldestSince: '2026-01-01T00:00:00.000Z', oldestAgeMs: 60_000 });
    s.options.parkedWarnKeys = 3;
    expect(verdictOf(s).level).toBe('OK');
    s.options.parkedWarnAgeMs = 60_000;
    expect(verdictOf(s).level).toBe('OK');
    s.parked.oldestAgeMs = 60_001;
    expect(messages(s)).toEqual([
      'WARNING 3 keys parked in "public"."inbox_parked" (7 events, the longest since 2026-01-01T00:00:00.000Z; parked longer than --parked-warn-age-ms 60000): their events go to the DLQ until `outbox dlq:replay` applies them',
    ]);
    s.parked.oldestAgeMs = 1;
    s.parked.totalKeys = 4;
    expect(messages(s)).toEqual([
      'WARNING 4 keys parked in "public"."inbox_parked" (7 events, the longest since 2026-01-01T00:00:00.000Z; over --parked-warn-keys 3): their events go to the DLQ until `outbox dlq:replay` applies them',
    ]);
  });
});
