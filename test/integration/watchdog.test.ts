/**
 * The slot-lag watchdog against the stack's real PostgreSQL and real logical slots, delivering to a
 * local HTTP receiver. Polls every 200 ms; thresholds are small. Every slot is dropped in afterAll.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { Command } from 'commander';
import { watchdogCommand } from '../../src/cli/watchdog-command';
import { loadConfig, type OutboxOptions } from '../../src/config';
import { POSTGRES, STACK_HOST } from '../../scripts/stack/settings';
import { createWatchdog, dedupKey, exitCodeFor, type Watchdog } from '../../src/watchdog';
import { freshDatabase, randomIdentifier, testPostgresPort, withClient, type FreshDatabase } from '../support/stack-env';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { waitsUpTo } from '../support/until';
import { startReceiver } from '../support/webhook-receiver';

const SECRET = `whsec_${Buffer.from('outbox-watchdog-test-secret-0123456789').toString('base64')}`;
const MiB = 1024 * 1024;
const PG_RECVLOGICAL = '/usr/lib/postgresql/15/bin/pg_recvlogical';

const until = waitsUpTo(15_000);

const sql = <T = Record<string, unknown>>(text: string, params: unknown[] = []) => withClient(POSTGRES.database, async (c) => (await c.query(text, params)).rows as T[]);
// WAL is cluster-wide, so any database grows the slots' retention; 'postgres' is one no connector decodes
// (a logical message in a connector's database is published by Debezium, and one this large fails its task).
const emitWal = (bytes: number) =>
  withClient('postgres', async (c) => (await c.query("SELECT pg_logical_emit_message(false, 'watchdog-test', repeat('x', $1::int))", [bytes])).rows);
const slotState = async (name: string) => (await sql<{ active: boolean; confirmed_flush_lsn: string }>('SELECT active, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1', [name]))[0];

type WatchdogOverrides = NonNullable<OutboxOptions['watchdog']>;

describe('slot-lag watchdog (real PostgreSQL, real slots)', () => {
  let db: FreshDatabase;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const slots: string[] = [];
  const watchdogs: Watchdog[] = [];
  const children: ChildProcess[] = [];
  let proxy: TcpProxy | undefined;

  const newSlot = async (plugin = 'test_decoding') => {
    const name = randomIdentifier('wd');
    await withClient(db.name, (c) => c.query('SELECT pg_create_logical_replication_slot($1, $2)', [name, plugin]));
    slots.push(name);
    return name;
  };

  const start = (watchdog: WatchdogOverrides, database: OutboxOptions['database'] = {}, pipeline: Pick<OutboxOptions, 'connector' | 'outbox'> = {}) => {
    const config = loadConfig({
      env: {},
      overrides: {
        ...pipeline,
        // A connector name no deployed connector has: the watchdog reads the named connector's stored offset
        // from Connect, and the demo test leaves the default one (outbox-connector) deployed with an offset,
        // which turned a missing slot here into SLOT_MISSING_AFTER_FAILOVER when it ran first.
        connector: { name: randomIdentifier('wdconn'), ...pipeline.connector },
        database: { host: STACK_HOST, port: testPostgresPort(), database: db.name, user: POSTGRES.user, password: POSTGRES.password, ...database },
        watchdog: {
          intervalMs: 200,
          cluster: 'test-cluster',
          clearForMs: 300,
          webhookUrl: receiver.url,
          webhookSecret: SECRET,
          rateWindowMs: 5_000,
          connectTimeoutMs: 1_000,
          statementTimeoutMs: 2_000,
          ...watchdog,
          delivery: { initialDelayMs: 100, maxDelayMs: 500, ...watchdog.delivery },
        },
      },
    });
    const wd = createWatchdog({ config });
    watchdogs.push(wd);
    wd.start();
    return wd;
  };

  const alertsFor = (slot: string | null, rule: string) =>
    receiver.received.filter((r) => r.body.dedupKey === dedupKey('test-cluster', slot, rule as never)).map((r) => `${String(r.body.event)}:${String(r.body.severity)}`);

  beforeAll(async () => {
    db = await freshDatabase('wd');
    receiver = await startReceiver();
  });

  afterEach(async () => {
    for (const wd of watchdogs.splice(0)) await wd.stop(0);
    for (const child of children.splice(0)) {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGKILL');
        await exited;
      }
    }
    await proxy?.close();
    proxy = undefined;
  });

  afterAll(async () => {
    for (const name of slots) {
      // a walsender may still be going away: wait until the slot is released
      for (let i = 0; i < 50; i++) {
        const s = await slotState(name);
        if (!s || !s.active) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      await sql('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1', [name]).catch(() => {});
    }
    await receiver?.close();
    await db?.drop();
  });

  it('an inactive slot with WAL behind it goes WARNING then CRITICAL, resolves when advanced, ends as dropped when dropped', async () => {
    const slot = await newSlot();
    // Creating a logical slot waits for running transactions (other suites' too); WAL written meanwhile is
    // already retained, so thresholds are set relative to where the slot stands now.
    const retained = async () => Number((await sql<{ r: string }>("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint AS r FROM pg_replication_slots WHERE slot_name = $1", [slot]))[0]?.r);
    const base = await retained();
    const warning = base + 8 * MiB;
    const critical = base + 32 * MiB;
    start({ slots: [slot], rules: { retainedBytes: { warning, critical }, retainedForMs: 0 } });
    await new Promise((r) => setTimeout(r, 500));
    expect(alertsFor(slot, 'SlotRetainedHigh')).toEqual([]);

    await emitWal(12 * MiB);
    await until('WARNING', () => alertsFor(slot, 'SlotRetainedHigh').length >= 1);
    await emitWal(30 * MiB);
    await until('CRITICAL', () => alertsFor(slot, 'SlotRetainedHigh').length >= 2);
    expect(alertsFor(slot, 'SlotRetainedHigh').slice(0, 2)).toEqual(['firing:warning', 'escalated:critical']);

    const firing = receiver.received.find((r) => r.body.dedupKey === dedupKey('test-cluster', slot, 'SlotRetainedHigh'));
    expect(firing?.body).toMatchObject({ schema: 'outbox-router.watchdog.alert/v1', status: 'firing', rule: 'SlotRetainedHigh', cluster: 'test-cluster', slot: { name: slot, type: 'logical', database: db.name } });
    expect((firing?.body.values as Record<string, unknown>).active).toBe(false);
    // signed per Standard Webhooks, verifiable by the receiver
    expect(new Webhook(SECRET).sign(String(firing?.headers['webhook-id']), new Date(Number(firing?.headers['webhook-timestamp']) * 1000), firing?.raw ?? '')).toBe(firing?.headers['webhook-signature']);

    // restart_lsn only moves past a running-xacts record (CHECKPOINT logs one; PG16+ has pg_log_standby_snapshot())
    // and never past the start of a transaction still open anywhere in the cluster: advance until it has moved
    await until(
      'slot advanced',
      () =>
        withClient(db.name, async (c) => {
          await c.query('SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())', [slot]);
          await c.query('CHECKPOINT');
          await c.query('SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())', [slot]);
          return (await retained()) < 0.9 * warning;
        }),
      60_000,
    );
    await until('resolved', () => alertsFor(slot, 'SlotRetainedHigh').includes('resolved:critical'));
    expect(alertsFor(slot, 'SlotRetainedHigh')).toEqual(['firing:warning', 'escalated:critical', 'resolved:critical']);

    // fire again, then drop the slot: the alert ends as "dropped", and SlotMissing fires (never "resolved")
    await emitWal(Math.max(MiB, warning - (await retained()) + 2 * MiB));
    await until('firing again', () => alertsFor(slot, 'SlotRetainedHigh').length >= 4);
    await withClient(db.name, (c) => c.query('SELECT pg_drop_replication_slot($1)', [slot]));
    await until('dropped', () => alertsFor(slot, 'SlotRetainedHigh').some((e) => e.startsWith('dropped')));
    expect(alertsFor(slot, 'SlotRetainedHigh').slice(3)).toEqual(['firing:warning', 'dropped:warning']);
    await until('SlotMissing', () => alertsFor(slot, 'SlotMissing').includes('firing:critical'));
  }, 120_000);

  it('a connected consumer that stops confirming fires SlotConsumerStalled while active stays true', async () => {
    const slot = await newSlot('test_decoding');
    const dir = mkdtempSync(join(tmpdir(), 'wd-recv-'));
    // a real walsender: pg_recvlogical streams the slot but, with a 1 h fsync interval, never reports a flush position
    const child = spawn(PG_RECVLOGICAL, ['-h', STACK_HOST, '-p', String(testPostgresPort()), '-U', POSTGRES.user, '-d', db.name, '-S', slot, '--start', '-f', join(dir, 'out'), '-F', '3600', '-s', '3600'], {
      env: { ...process.env, PGPASSWORD: POSTGRES.password },
      stdio: 'ignore',
    });
    children.push(child);
    await until('walsender active', async () => (await slotState(slot))?.active === true);
    const confirmedBefore = (await slotState(slot))?.confirmed_flush_lsn;

    const wd = start({ slots: [slot], rules: { stalledMs: { warning: 1_000, critical: 600_000 }, stalledMinWalBytes: 64 * 1024, inactiveMs: { warning: 60_000, critical: 120_000 } } });
    const writer = setInterval(() => void emitWal(100_000).catch(() => {}), 100);
    try {
      await until('stalled alert', () => alertsFor(slot, 'SlotConsumerStalled').includes('firing:warning'));
    } finally {
      clearInterval(writer);
    }
    const alert = receiver.received.find((r) => r.body.dedupKey === dedupKey('test-cluster', slot, 'SlotConsumerStalled'));
    expect((alert?.body.values as Record<string, unknown>).active).toBe(true);
    expect(String(alert?.body.summary)).toMatch(/connected .*confirmed_flush_lsn has not moved/);
    const now = await slotState(slot);
    expect(now?.active).toBe(true);
    expect(now?.confirmed_flush_lsn).toBe(confirmedBefore);
    expect(alertsFor(slot, 'SlotInactive')).toEqual([]);
    expect(wd.statuses().find((s) => s.slot === slot && s.rule === 'SlotConsumerStalled')?.level).toBe('warning');
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('the database going away raises the watchdog’s own alert without resolving slot alerts, and recovers', async () => {
    proxy = await startTcpProxy(testPostgresPort());
    const slot = await newSlot();
    await emitWal(2 * MiB);
    const wd = start({ slots: [slot], rules: { retainedBytes: { warning: 1 * MiB, critical: 1024 * MiB }, retainedForMs: 0 } }, { port: proxy.port });
    await until('slot alert', () => alertsFor(slot, 'SlotRetainedHigh').includes('firing:warning'));

    proxy.cut();
    await until('unreachable alert', () => alertsFor(null, 'WatchdogDatabaseUnreachable').includes('firing:critical'));
    const own = receiver.received.find((r) => r.body.rule === 'WatchdogDatabaseUnreachable');
    expect(String(own?.body.summary)).toMatch(/cannot read replication slots on test-cluster/);
    expect(String(own?.body.summary)).toMatch(/Check that PostgreSQL runs and accepts connections at 127\.0\.0\.1:\d+/);
    expect(wd.health()).toMatchObject({ lastPollOk: false });
    expect(wd.ready()).toBe(false); // /readyz: the last poll failed
    await new Promise((r) => setTimeout(r, 600));
    expect(alertsFor(slot, 'SlotRetainedHigh')).toEqual(['firing:warning']);

    proxy.restore();
    await until('recovered', () => alertsFor(null, 'WatchdogDatabaseUnreachable').includes('resolved:critical'));
    expect(wd.health()).toMatchObject({ lastPollOk: true, consecutiveFailures: 0 });
    expect(wd.ready()).toBe(true);
    // the slot alert survived the outage: still firing, never resolved
    expect(alertsFor(slot, 'SlotRetainedHigh')).toEqual(['firing:warning']);
    expect(wd.statuses().find((s) => s.slot === slot && s.rule === 'SlotRetainedHigh')?.level).toBe('warning');
    const raw = JSON.stringify(receiver.received.map((r) => r.body));
    expect(raw).not.toContain(POSTGRES.password === 'postgres' ? 'password=postgres' : POSTGRES.password);
  });

  it('a receiver answering 500 then 200 gets the alert exactly once more, with the same dedup key', async () => {
    const slot = await newSlot();
    await emitWal(2 * MiB);
    const before = receiver.received.length;
    receiver.answers.push(500);
    start({ slots: [slot], rules: { retainedBytes: { warning: 1 * MiB, critical: 1024 * MiB }, retainedForMs: 0 } });
    await until('two requests', () => alertsFor(slot, 'SlotRetainedHigh').length >= 2);
    await new Promise((r) => setTimeout(r, 1_000));
    const mine = receiver.received.slice(before).filter((r) => r.body.dedupKey === dedupKey('test-cluster', slot, 'SlotRetainedHigh'));
    expect(mine).toHaveLength(2);
    expect(mine.map((r) => r.headers['webhook-id'])).toEqual([mine[0]?.headers['webhook-id'], mine[0]?.headers['webhook-id']]);
    expect(mine.map((r) => r.body.event)).toEqual(['firing', 'firing']);
  });

  it('an unreachable webhook never blocks polling; notifications wait in the queue', async () => {
    const slot = await newSlot();
    await emitWal(2 * MiB);
    let polls = 0;
    const config = loadConfig({
      env: {},
      overrides: {
        database: { database: db.name, port: testPostgresPort() },
        watchdog: { intervalMs: 100, slots: [slot], webhookUrl: 'http://127.0.0.1:9/unreachable', rules: { retainedBytes: { warning: MiB, critical: 1024 * MiB }, retainedForMs: 0 }, delivery: { initialDelayMs: 5_000 } },
      },
    });
    const wd = createWatchdog({ config, onEvent: (name) => void (name === 'watchdog.poll' && polls++) });
    watchdogs.push(wd);
    wd.start();
    await until('polls continue', () => polls >= 6 && wd.deliverer.pending().webhook === 1);
    expect(wd.health().pendingDeliveries).toEqual({ webhook: 1 });
  });

  it('wrong credentials and a role without rights get a clear message and the watchdog’s own alert; pg_monitor is enough', async () => {
    const role = randomIdentifier('wdmon');
    await sql(`CREATE ROLE ${role} LOGIN PASSWORD 'mon-secret-1' IN ROLE pg_monitor`);
    try {
      const slot = await newSlot();
      const cfg = (watchdog: WatchdogOverrides) => loadConfig({ env: {}, overrides: { database: { database: db.name, port: testPostgresPort() }, watchdog: { slots: [slot], ...watchdog } } });

      const ok = createWatchdog({ config: cfg({ user: role, password: 'mon-secret-1' }), deliver: false });
      const good = await ok.pollOnce();
      await ok.stop(0);
      expect(good.ok).toBe(true);
      expect(good.sample?.slots.map((s) => s.slotName)).toEqual(expect.arrayContaining([slot]));

      const bad = createWatchdog({ config: cfg({ user: role, password: 'wrong-password-xyz' }), deliver: false });
      const failed = await bad.pollOnce();
      await bad.stop(0);
      expect(failed.ok).toBe(false);
      expect(failed.error?.message).toMatch(new RegExp(`Authentication failed for role ${role}.*OUTBOX_WATCHDOG_USER`));
      expect(failed.error?.message).not.toContain('wrong-password-xyz');
      expect(failed.notifications.map((n) => [n.rule, n.severity])).toEqual([['WatchdogDatabaseUnreachable', 'critical']]);

      await withClient('postgres', (c) => c.query(`REVOKE CONNECT ON DATABASE ${c.escapeIdentifier(db.name)} FROM PUBLIC`));
      const denied = createWatchdog({ config: cfg({ user: role, password: 'mon-secret-1' }), deliver: false });
      const refused = await denied.pollOnce();
      await denied.stop(0);
      expect(refused.error?.details.code).toBe('42501');
      expect(refused.error?.message).toMatch(new RegExp(`lacks a right.*GRANT pg_monitor TO ${role}`));
    } finally {
      await withClient('postgres', (c) => c.query(`GRANT CONNECT ON DATABASE ${c.escapeIdentifier(db.name)} TO PUBLIC`));
      await sql(`DROP ROLE IF EXISTS ${role}`);
    }
  });

  it('`outbox watchdog --once` prints a table and exits 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN', async () => {
    const slot = await newSlot();
    await emitWal(2 * MiB);
    const saved = { ...process.env };
    const runOnce = async (env: Record<string, string>) => {
      let out = '';
      const spy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
        out += chunk.toString();
        return true;
      });
      Object.assign(process.env, { PGDATABASE: db.name, PGPORT: String(testPostgresPort()), OUTBOX_WATCHDOG_SLOTS: slot, ...env });
      try {
        await new Command('outbox').exitOverride().addCommand(watchdogCommand()).parseAsync(['node', 'outbox', 'watchdog', '--once']);
        return { out, code: process.exitCode };
      } finally {
        spy.mockRestore();
        process.env = { ...saved };
        process.exitCode = undefined;
      }
    };
    const ok = await runOnce({ OUTBOX_WATCHDOG_RETAINED_WARNING_BYTES: String(1024 * MiB), OUTBOX_WATCHDOG_RETAINED_CRITICAL_BYTES: String(2048 * MiB) });
    expect(ok.code).toBe(0);
    expect(ok.out).toMatch(/^SLOT WATCHDOG OK/);
    expect(ok.out).toContain(slot);
    const warn = await runOnce({ OUTBOX_WATCHDOG_RETAINED_WARNING_BYTES: String(MiB) });
    expect(warn.code).toBe(1);
    expect(warn.out).toMatch(new RegExp(`WARNING SlotRetainedHigh \\[${slot}\\]`));
    const crit = await runOnce({ OUTBOX_WATCHDOG_RETAINED_WARNING_BYTES: '1', OUTBOX_WATCHDOG_RETAINED_CRITICAL_BYTES: String(MiB) });
    expect(crit.code).toBe(2);
    const unknown = await runOnce({ PGPORT: '1' });
    expect(unknown.code).toBe(3);
    expect(unknown.out).toMatch(/^SLOT WATCHDOG UNKNOWN[\s\S]*ECONNREFUSED[\s\S]*PGHOST \/ PGPORT/);
    const badThreshold = await runOnce({ OUTBOX_WATCHDOG_RETAINED_WARNING_BYTES: '5GB' });
    expect(badThreshold.code).toBe(3);
    expect(badThreshold.out).toContain('OUTBOX_WATCHDOG_RETAINED_WARNING_BYTES');
  });

  it('with watchdog.slots empty, the connector’s own slot (connector.slotName) missing fires SlotMissing; its creation resolves it', async () => {
    const slot = randomIdentifier('wd_conn');
    start({ slots: [] }, {}, { connector: { slotName: slot } });
    await until('SlotMissing', () => alertsFor(slot, 'SlotMissing').includes('firing:critical'));
    const fired = receiver.received.find((r) => r.body.dedupKey === dedupKey('test-cluster', slot, 'SlotMissing'));
    expect(String(fired?.body.summary)).toContain(`Slot ${slot}, the Debezium connector's slot (connector.slotName), does not exist`);

    await withClient(db.name, (c) => c.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [slot]));
    slots.push(slot);
    await until('resolved', () => alertsFor(slot, 'SlotMissing').includes('resolved:critical'));
  });

  it('PublicationDrift fires CRITICAL when the publication stops publishing outbox inserts, while the slot looks healthy, and resolves after the repair', async () => {
    const publication = randomIdentifier('wd_pub');
    const table = randomIdentifier('wd_outbox');
    await withClient(db.name, async (c) => {
      await c.query(`CREATE TABLE public.${table} (id int PRIMARY KEY)`);
      await c.query(`CREATE PUBLICATION ${publication} FOR TABLE public.${table}`);
    });
    const slot = await newSlot('pgoutput');
    const pipeline = { connector: { slotName: slot }, outbox: { publication, table } };
    start({ slots: [slot] }, {}, pipeline);
    await new Promise((r) => setTimeout(r, 600));
    expect(alertsFor(slot, 'PublicationDrift')).toEqual([]);

    await withClient(db.name, (c) => c.query(`ALTER PUBLICATION ${publication} SET (publish = 'update')`));
    await until('drift alert', () => alertsFor(slot, 'PublicationDrift').includes('firing:critical'));
    const alert = receiver.received.find((r) => r.body.dedupKey === dedupKey('test-cluster', slot, 'PublicationDrift'));
    expect(String(alert?.body.summary)).toMatch(/Outbox events are being lost: publication "\w+" does not publish inserts .*db:provision/);
    expect(alert?.body.values).toMatchObject({ publication, pubinsert: false, tablePublished: true });

    // `watchdog --once` judges the same: CRITICAL.
    const once = createWatchdog({ config: loadConfig({ env: {}, overrides: { ...pipeline, database: { database: db.name, port: testPostgresPort() }, watchdog: { slots: [slot] } } }), instant: true, deliver: false });
    try {
      const result = await once.pollOnce();
      expect(once.statuses().filter((s) => s.rule === 'PublicationDrift')).toEqual([expect.objectContaining({ slot, level: 'critical' })]);
      expect(exitCodeFor(result.ok, once.statuses())).toBe(2);
    } finally {
      await once.stop(0);
    }

    await withClient(db.name, (c) => c.query(`ALTER PUBLICATION ${publication} SET (publish = 'insert, update')`));
    await until('resolved', () => alertsFor(slot, 'PublicationDrift').includes('resolved:critical'));
    await withClient(db.name, (c) => c.query(`ALTER PUBLICATION ${publication} DROP TABLE public.${table}`));
    await until('drift again: table removed', () => alertsFor(slot, 'PublicationDrift').filter((e) => e === 'firing:critical').length === 2);
    expect(alertsFor(slot, 'PublicationDrift')).toEqual(['firing:critical', 'resolved:critical', 'firing:critical']);
  });
});
