import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Partitioners, type Admin } from 'kafkajs';
import { loadConfig, type OutboxConfig } from '../../src/config';
import { createLogger } from '../../src/log';
import { startHealthServer } from '../../src/router';
import { POSTGRES } from '../../scripts/stack/settings';
import { collectStatus, computeVerdict, renderStatus, type StatusReport } from '../../src/status';
import { healthy } from '../unit/status/fixtures';
import { createWatchdog, watchdogHealthBody } from '../../src/watchdog';
import { provision } from '../../src/provision';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomIdentifier, randomName, testKafka, withClient, type FreshDatabase } from '../support/stack-env';

/**
 * `outbox status` against the real stack: a DLQ topic with a known number of records, a routed topic
 * with a group that committed part of it, an inactive logical slot of our own, and an unreachable
 * Connect URL. Names are random, so other suites running at the same time do not disturb the numbers.
 */

const ROOT = join(__dirname, '..', '..');
const MAIN = join(ROOT, 'dist', 'cli', 'main.js');

function run(file: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs = 120_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: ROOT, env, timeout: timeoutMs, maxBuffer: 16 * 2 ** 20 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** Builds dist/ if it is older than the status sources; others' transient type errors do not stop tsc emitting. */
async function ensureBuilt(): Promise<void> {
  const sources = ['src/cli/status-command.ts', 'src/status/collect.ts', 'src/status/sections.ts', 'src/status/parked.ts', 'src/status/outbox-table.ts', 'src/status/render.ts', 'src/status/verdict.ts', 'src/status/format.ts'];
  const built = join(ROOT, 'dist', 'status', 'collect.js');
  const newest = Math.max(...sources.map((s) => statSync(join(ROOT, s)).mtimeMs));
  if (existsSync(built) && existsSync(MAIN) && statSync(built).mtimeMs >= newest) return;
  await run(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], process.env, 240_000);
  if (!existsSync(built) || !readFileSync(join(ROOT, 'dist', 'cli', 'status-command.js'), 'utf8').includes('collectStatus')) {
    throw new Error('`npm run -s build` did not produce dist/status and dist/cli/status-command.js');
  }
}

describe('outbox status (real stack)', () => {
  const id = randomName('status');
  const dlqTopic = `outbox.dlq.${id}`;
  const routedTopic = `outbox.event.${id}`;
  const groupId = randomName('status-group');
  const missingGroup = randomName('status-missing');
  const slotName = randomIdentifier('status_slot');
  const DLQ_RECORDS = 5;
  let admin: Admin;
  let config: OutboxConfig;
  let slotCreated = false;

  beforeAll(async () => {
    const kafka = testKafka();
    admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({
      waitForLeaders: true,
      topics: [
        { topic: dlqTopic, numPartitions: 2 },
        { topic: routedTopic, numPartitions: 2 },
      ],
    });
    const producer = kafka.producer({ allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    try {
      await producer.send({
        topic: dlqTopic,
        messages: Array.from({ length: DLQ_RECORDS }, (_, i) => ({ key: `k${i}`, value: `dead ${i}`, partition: i % 2 })),
      });
      // 6 records on partition 0, 4 on partition 1.
      await producer.send({
        topic: routedTopic,
        messages: Array.from({ length: 10 }, (_, i) => ({ key: `k${i}`, value: `event ${i}`, partition: i < 6 ? 0 : 1 })),
      });
    } finally {
      await producer.disconnect();
    }
    // The group consumed 2 records of partition 0 and committed; nothing of partition 1: lag (6 − 2) + (4 − 0) = 8.
    await admin.setOffsets({ groupId, topic: routedTopic, partitions: [{ partition: 0, offset: '2' }] });

    await withClient(POSTGRES.database, (c) => c.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [slotName]));
    slotCreated = true;

    config = loadConfig({
      env: {},
      overrides: { connector: { name: randomName('status-conn'), slotName: randomIdentifier('status_cfg') } },
    });
  }, 120_000);

  afterAll(async () => {
    if (slotCreated) {
      await withClient(POSTGRES.database, (c) => c.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1', [slotName]));
    }
    await admin?.deleteGroups([groupId]).catch(() => {});
    await admin?.deleteTopics({ topics: [dlqTopic, routedTopic] }).catch(() => {});
    await admin?.disconnect();
  });

  let status: StatusReport;

  it('reports the exact DLQ depth, the group lag per topic and our inactive slot', async () => {
    status = await collectStatus(config, { timeoutMs: 15_000, groups: [missingGroup] });

    if (!status.dlq.ok) throw new Error(`dlq section failed: ${status.dlq.error}`);
    // Created without retention.ms: the broker's default (finite), which status reads and warns about.
    expect(status.dlq.topics.find((t) => t.topic === dlqTopic)).toEqual({ topic: dlqTopic, partitions: 2, depth: DLQ_RECORDS, retentionMs: expect.any(Number) });
    expect(status.dlq.total).toBeGreaterThanOrEqual(DLQ_RECORDS);

    if (!status.consumerGroups.ok) throw new Error(`groups section failed: ${status.consumerGroups.error}`);
    const group = status.consumerGroups.groups.find((g) => g.groupId === groupId);
    expect(group).toMatchObject({ requested: false, state: 'Empty', members: 0, totalLag: 8 });
    expect(group?.topics).toEqual([
      {
        topic: routedTopic,
        lag: 8,
        partitions: [
          { partition: 0, committed: 2, low: 0, high: 6, lag: 4 },
          { partition: 1, committed: null, low: 0, high: 4, lag: 4 },
        ],
      },
    ]);
    expect(status.consumerGroups.groups.find((g) => g.groupId === missingGroup)).toMatchObject({ requested: true, state: 'Dead', topics: [], totalLag: 0 });

    if (!status.slots.ok) throw new Error(`slots section failed: ${status.slots.error}`);
    const slot = status.slots.slots.find((s) => s.name === slotName);
    expect(slot).toMatchObject({ configured: false, active: false, activePid: null, plugin: 'pgoutput', database: POSTGRES.database, walStatus: 'reserved' });
    expect(slot?.retainedBytes).toBeGreaterThanOrEqual(0);
    expect(slot?.confirmedLagBytes).toBeGreaterThanOrEqual(0);
    expect(status.slots).toMatchObject({ slotName: config.connector.slotName, found: false });

    // Connect answers; the random connector is not deployed: that, and the missing slot, are critical.
    expect(status.connector).toMatchObject({ ok: true, deployed: false, name: config.connector.name, tasks: [] });
    expect(status.stack.ok).toBe(true);
    // The local stack's services, probed on their ports (the library does not read the harness's pid files).
    if (!status.stack.ok) throw new Error(`stack section failed: ${status.stack.error}`);
    expect(status.stack.local).toBe(true);
    expect(status.stack.services.map((s) => [s.name, s.running, s.ready])).toEqual([
      ['postgres', true, true],
      ['kafka', true, true],
      ['registry', true, true],
      ['connect', true, true],
    ]);
    expect(status.watchdog.ok).toBe(true);
    expect(status.verdict).toMatchObject({ level: 'CRITICAL', exitCode: 2 });
    const reasons = status.verdict.reasons.map((r) => r.message);
    expect(reasons).toEqual(
      expect.arrayContaining([
        `connector ${config.connector.name} is not deployed`,
        `replication slot ${config.connector.slotName} does not exist`,
        `DLQ ${dlqTopic} holds ${DLQ_RECORDS} records`,
        `other logical slot ${slotName} is inactive and retains WAL (drop it if nothing uses it)`,
        `consumer group ${missingGroup} does not exist (no members, no committed offsets)`,
      ]),
    );
    expect(JSON.parse(JSON.stringify(status))).toEqual(status);
  });

  it('warns about a DLQ topic with finite retention (verdict WARNING), not about one with retention.ms=-1', async () => {
    const finite = `outbox.dlq.${randomName('status-ret')}`;
    const forever = `outbox.dlq.${randomName('status-keep')}`;
    await admin.createTopics({
      waitForLeaders: true,
      topics: [
        { topic: finite, numPartitions: 1, configEntries: [{ name: 'retention.ms', value: '604800000' }] },
        { topic: forever, numPartitions: 1, configEntries: [{ name: 'retention.ms', value: '-1' }] },
      ],
    });
    try {
      const only = (topics: string[]) => new RegExp(`^(${topics.map((t) => t.replace(/\./g, '\\.')).join('|')})$`);
      const s = await collectStatus(config, { timeoutMs: 15_000, dlqTopics: only([finite, forever]) });
      if (!s.dlq.ok) throw new Error(`dlq section failed: ${s.dlq.error}`);
      expect(s.dlq.topics).toEqual([
        { topic: finite, partitions: 1, depth: 0, retentionMs: 604_800_000 },
        { topic: forever, partitions: 1, depth: 0, retentionMs: -1 },
      ].sort((a, b) => a.topic.localeCompare(b.topic)));
      const warning = `DLQ ${finite} deletes dead letters after 7 d (retention.ms=604800000): keep them with \`kafka-configs.sh --alter --entity-type topics --entity-name ${finite} --add-config retention.ms=-1\``;
      expect(s.verdict.reasons).toContainEqual({ level: 'WARNING', message: warning });
      expect(s.verdict.reasons.map((r) => r.message).filter((m) => m.includes(forever))).toEqual([]);
      expect(renderStatus(s, { color: false })).toMatch(new RegExp(`│ ${finite.replace(/\./g, '\\.')} +│ 1 +│ 0 +│ 7 d +│`));
      // The DLQ section alone decides the verdict when everything else is healthy: WARNING with retention 7 d, OK with -1.
      expect(computeVerdict({ ...healthy(), dlq: s.dlq })).toEqual({ level: 'WARNING', exitCode: 1, reasons: [{ level: 'WARNING', message: warning }] });
      const kept = await collectStatus(config, { timeoutMs: 15_000, dlqTopics: only([forever]) });
      expect(computeVerdict({ ...healthy(), dlq: kept.dlq })).toEqual({ level: 'OK', exitCode: 0, reasons: [] });
    } finally {
      await admin.deleteTopics({ topics: [finite, forever] }).catch(() => {});
    }
  });

  it('applies --lag-warn to the group lag', async () => {
    const strict = await collectStatus(config, { timeoutMs: 15_000, lagWarn: 7, groups: [groupId] });
    expect(strict.verdict.reasons.map((r) => r.message)).toContain(`consumer group ${groupId} lags 8 records on ${routedTopic} (over --lag-warn 7)`);
    const lenient = await collectStatus(config, { timeoutMs: 15_000, lagWarn: 8, groups: [groupId] });
    expect(lenient.verdict.reasons.map((r) => r.message).filter((m) => m.includes(groupId))).toEqual([]);
    if (!lenient.consumerGroups.ok) throw new Error(lenient.consumerGroups.error);
    expect(lenient.consumerGroups.groups[0]).toMatchObject({ groupId, requested: true, totalLag: 8 });
  });

  it('an unreachable Connect URL fails only the connector section, and the screen still renders', async () => {
    const offline = loadConfig({ env: {}, overrides: { connector: config.connector, connect: { url: 'http://127.0.0.1:1' } } });
    const started = Date.now();
    const s = await collectStatus(offline, { timeoutMs: 5_000 });
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(s.connector.ok).toBe(false);
    if (s.connector.ok) return;
    expect(s.connector.error).toContain('http://127.0.0.1:1');
    expect(s.connector.error).toMatch(/OUTBOX_CONNECT_URL|stack:up/);
    expect([s.stack.ok, s.slots.ok, s.consumerGroups.ok, s.dlq.ok, s.watchdog.ok]).toEqual([true, true, true, true, true]);
    expect(s.verdict.reasons.map((r) => r.message)).toContain(`connector: could not be checked (${s.connector.error.split('. ')[0]})`);

    const screen = renderStatus(s, { color: false });
    expect(screen).toContain(`Connector\n  unreachable: ${s.connector.error}`);
    expect(screen).toMatch(new RegExp(`│ ${dlqTopic.replace(/\./g, '\\.')} +│ 2 +│ ${DLQ_RECORDS} +│`));
    expect(screen).toContain(`${slotName} (other)`);
  });

  it('shows a running watchdog (the real one, on its /healthz) and the alerts it has firing', async () => {
    const missing = randomName('status_gone').replace(/-/g, '_');
    const wdConfig = loadConfig({ env: {}, overrides: { database: { database: config.database.database }, watchdog: { slots: [missing] } } });
    const watchdog = createWatchdog({ config: wdConfig, logger: createLogger({ level: 'silent' }) });
    await watchdog.pollOnce(); // a listed slot that does not exist: SlotMissing fires at once (critical)
    const http = await startHealthServer({ host: '127.0.0.1', port: 0, registry: watchdog.metrics.registry, health: () => watchdogHealthBody(watchdog) });
    try {
      const s = await collectStatus(config, { timeoutMs: 15_000, watchdogUrl: `http://127.0.0.1:${http.port}/metrics` });
      expect(s.watchdog).toMatchObject({ ok: true, running: true, firing: ['SlotMissing'], url: `http://127.0.0.1:${http.port}` });
      expect(s.verdict.reasons.map((r) => r.message)).toContain('watchdog: 1 alert(s) firing: SlotMissing');
      expect(renderStatus(s, { color: false })).toContain('firing: SlotMissing');
    } finally {
      await http.close();
      await watchdog.stop(0);
    }
  });

  it('`node dist/cli/main.js status --json` prints parseable JSON with every section and exits with the verdict', async () => {
    await ensureBuilt();
    const dir = mkdtempSync(join(tmpdir(), 'status-cli-'));
    try {
      const file = join(dir, 'outbox.yaml');
      // Connect without authentication ignores the credentials; they must still never be printed.
      const secret = `s3cret-${id}`;
      writeFileSync(
        file,
        `connector:\n  name: ${config.connector.name}\n  slotName: ${config.connector.slotName}\nconnect:\n  username: status\n  password: ${secret}\n`,
      );
      const env = { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'silent' };
      const args = [MAIN, 'status', '--json', '--config', file, '--timeout', '15000', '--dlq-topics', `^${dlqTopic.replace(/\./g, '\\.')}$`, '--group', groupId, '--watchdog-url', `http://wd:${secret}@127.0.0.1:1/metrics`];
      const { code, stdout, stderr } = await run(process.execPath, args, env);
      const parsed = JSON.parse(stdout) as StatusReport;
      for (const name of ['stack', 'connector', 'slots', 'consumerGroups', 'dlq', 'parked', 'outboxTable', 'topicPartitions', 'watchdog'] as const) {
        expect(typeof parsed[name].ok).toBe('boolean');
      }
      expect(parsed.dlq).toMatchObject({ ok: true, total: DLQ_RECORDS, topics: [{ topic: dlqTopic, partitions: 2, depth: DLQ_RECORDS }] });
      expect(parsed.connector).toMatchObject({ ok: true, deployed: false });
      expect(parsed.verdict.level).toBe('CRITICAL');
      expect(code).toBe(2);
      expect(stdout).not.toContain(secret);
      expect(parsed.targets.watchdog).toBe('http://[redacted]@127.0.0.1:1');
      expect(parsed.watchdog).toMatchObject({ ok: true, running: false, firing: [] });
      expect(stderr).toBe('');

      const bad = await run(process.execPath, [MAIN, 'status', '--lag-warn', 'lots'], env);
      expect(bad.code).toBe(1);
      expect(bad.stderr).toContain('--lag-warn expects a whole number ≥ 0, got "lots"');
      expect(bad.stdout).toBe('');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);
});

/**
 * `outbox status` lists the router's parked keys from `<schema>.<inbox>_parked` on a real, provisioned
 * database of its own: rows inserted by SQL, as the router would have parked them.
 */
describe('outbox status: parked keys (real database)', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;

  beforeAll(async () => {
    db = await freshDatabase('status_parked');
    config = testConfig(db.name);
    await provision(config);
  }, 120_000);

  afterAll(async () => {
    await db?.drop();
  });

  const sql = (text: string, values: unknown[] = []) => withClient(db.name, (c) => c.query(text, values));

  it('a database without the parked table shows "not provisioned", not an error', async () => {
    const bare = await freshDatabase('status_bare');
    try {
      const s = await collectStatus(testConfig(bare.name), { timeoutMs: 15_000 });
      expect(s.parked).toMatchObject({ ok: true, provisioned: false, totalKeys: 0, keys: [] });
      expect(s.verdict.reasons.map((r) => r.message).filter((m) => m.includes('parked'))).toEqual([]);
    } finally {
      await bare.drop();
    }
  });

  it('lists each parked key with its head event (smallest seq), count and since when, the most events first, bounded, with totals', async () => {
    // billing/order/o-1: 3 events, parked out of id order (the head is the smallest seq, not the smallest id).
    // billing/order/o-2: 1; shipping/order/o-1: 2 (another consumer: another key); billing/invoice/i-9: 1.
    const rows: Array<[string, string, string, string, string, string]> = [
      ['billing', 'order', 'o-1', 'e-30', 'HANDLER_FAILED', '2026-01-01T10:00:00Z'],
      ['billing', 'order', 'o-1', 'e-10', 'KEY_PARKED', '2026-01-01T10:05:00Z'],
      ['billing', 'order', 'o-1', 'e-20', 'KEY_PARKED', '2026-01-01T10:06:00Z'],
      ['billing', 'order', 'o-2', 'e-40', 'DECODE_FAILED', '2026-01-02T00:00:00Z'],
      ['shipping', 'order', 'o-1', 'e-50', 'HANDLER_TIMEOUT', '2026-01-03T00:00:00Z'],
      ['shipping', 'order', 'o-1', 'e-51', 'KEY_PARKED', '2026-01-03T00:01:00Z'],
      ['billing', 'invoice', 'i-9', 'e-60', 'HANDLER_FAILED', '2025-12-31T00:00:00Z'],
    ];
    for (const r of rows) {
      await sql('INSERT INTO public.inbox_parked (consumer, aggregate_type, aggregate_id, event_id, error_code, parked_at) VALUES ($1, $2, $3, $4, $5, $6)', r);
    }

    const s = await collectStatus(config, { timeoutMs: 15_000, parkedLimit: 2 });
    if (!s.parked.ok) throw new Error(`parked section failed: ${s.parked.error}`);
    expect(s.parked).toMatchObject({ provisioned: true, table: '"public"."inbox_parked"', totalKeys: 4, totalEvents: 7, limit: 2, oldestSince: '2025-12-31T00:00:00.000Z' });
    expect(s.parked.keys).toEqual([
      { consumer: 'billing', aggregateType: 'order', aggregateId: 'o-1', events: 3, headEventId: 'e-30', headErrorCode: 'HANDLER_FAILED', since: '2026-01-01T10:00:00.000Z' },
      { consumer: 'shipping', aggregateType: 'order', aggregateId: 'o-1', events: 2, headEventId: 'e-50', headErrorCode: 'HANDLER_TIMEOUT', since: '2026-01-03T00:00:00.000Z' },
    ]);
    expect(s.verdict.reasons).toContainEqual({
      level: 'WARNING',
      message: '4 keys parked in "public"."inbox_parked" (7 events, the longest since 2025-12-31T00:00:00.000Z): their events go to the DLQ until `outbox dlq:replay` applies them',
    });
    const screen = renderStatus(s, { color: false });
    expect(screen).toMatch(/│ billing +│ order +│ o-1 +│ 3 +│ e-30 +│ HANDLER_FAILED +│ 2026-01-01T10:00:00\.000Z +│/);
    expect(screen).toContain('… and 2 more key(s)');
    expect(JSON.parse(JSON.stringify(s))).toEqual(s);
  });

  it('`outbox status --json --parked-limit` prints the parked keys for scripts', async () => {
    const env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      LOG_LEVEL: 'silent',
      PGDATABASE: db.name,
      OUTBOX_STACK_DIR: process.env.OUTBOX_STACK_DIR,
    };
    await ensureBuilt();
    const { stdout } = await run(process.execPath, [MAIN, 'status', '--json', '--parked-limit', '1', '--timeout', '15000'], env);
    const parsed = JSON.parse(stdout) as { parked: { ok: boolean; totalKeys: number; keys: Array<{ aggregateId: string; events: number; headEventId: string }> } };
    expect(parsed.parked).toMatchObject({ ok: true, totalKeys: 4, keys: [{ aggregateId: 'o-1', events: 3, headEventId: 'e-30' }] });
  });
});
