import type { GroupInfo, SlotRow, StatusReport } from '../../../src/status';

export function slot(overrides: Partial<SlotRow> = {}): SlotRow {
  return {
    name: 'outbox_slot',
    configured: true,
    plugin: 'pgoutput',
    database: 'app',
    active: true,
    activePid: 4242,
    walStatus: 'reserved',
    retainedBytes: 1536,
    confirmedLagBytes: 0,
    safeWalSizeBytes: null,
    ...overrides,
  };
}

export function group(overrides: Partial<GroupInfo> = {}): GroupInfo {
  return {
    groupId: 'outbox-router',
    requested: true,
    state: 'Stable',
    members: 1,
    clients: ['outbox-router-router@127.0.0.1'],
    totalLag: 3,
    topics: [{ topic: 'outbox.event.order', lag: 3, partitions: [{ partition: 0, committed: 7, low: 0, high: 10, lag: 3 }] }],
    ...overrides,
  };
}

/** A healthy report: every section readable, nothing to warn about. */
export function healthy(): StatusReport {
  return {
    generatedAt: '2026-01-02T03:04:05.000Z',
    verdict: { level: 'OK', exitCode: 0, reasons: [] },
    targets: { database: 'postgres@127.0.0.1:55432/app', kafka: ['127.0.0.1:9092'], connect: 'http://127.0.0.1:8083', watchdog: 'http://127.0.0.1:9465' },
    options: { timeoutMs: 3000, parkedLimit: 10, lagWarn: 1000, parkedWarnKeys: 0, parkedWarnAgeMs: null, groups: ['outbox-router'], groupsGiven: false, outboxWarnAgeMs: 900_000, outboxWarnBytes: 1024 ** 3, outboxWarnPending: null },
    stack: {
      ok: true,
      ms: 12,
      local: true,
      note: null,
      services: [
        { name: 'postgres', running: true, ready: true, pid: 100, ports: [55432], rssBytes: 100 * 2 ** 20, detail: 'PostgreSQL 16.4, wal_level=logical' },
        { name: 'kafka', running: true, ready: true, pid: 101, ports: [9092, 9093], rssBytes: 300 * 2 ** 20, detail: '1 broker(s)' },
      ],
    },
    connector: {
      ok: true,
      ms: 20,
      name: 'outbox-connector',
      url: 'http://127.0.0.1:8083',
      deployed: true,
      state: 'RUNNING',
      worker: '127.0.0.1:8083',
      trace: null,
      tasks: [{ id: 0, state: 'RUNNING', worker: '127.0.0.1:8083', trace: null }],
      slotName: 'outbox_slot',
    },
    slots: { ok: true, ms: 5, slotName: 'outbox_slot', found: true, slots: [slot()], standby: { configured: false } },
    consumerGroups: { ok: true, ms: 30, topicPattern: '^outbox\\.event\\..+$', groups: [group()] },
    dlq: { ok: true, ms: 25, topicPattern: '^outbox\\.dlq\\..+$', total: 0, topics: [{ topic: 'outbox.dlq.order', partitions: 1, depth: 0, retentionMs: -1 }] },
    parked: { ok: true, ms: 4, table: '"public"."inbox_parked"', provisioned: true, totalKeys: 0, totalEvents: 0, oldestSince: null, oldestAgeMs: null, limit: 10, keys: [] },
    outboxTable: {
      ok: true,
      ms: 3,
      table: 'public.outbox',
      provisioned: true,
      estimatedRows: 120,
      totalBytes: 96 * 1024,
      deadTuples: 4,
      lastAutovacuum: '2026-01-02T03:00:00.000Z',
      lastVacuum: null,
      oldestPendingAgeSeconds: 0,
      pendingRows: 0,
      pendingCapped: false,
      pendingError: null,
    },
    topicPartitions: { ok: true, ms: 6, recorded: true, creationDefault: 3, topics: [{ topic: 'outbox.event.order', partitions: 3, recorded: 3 }], changes: [] },
    watchdog: { ok: true, ms: 3, url: 'http://127.0.0.1:9465', running: false, httpStatus: null, health: null, firing: [] },
  };
}
