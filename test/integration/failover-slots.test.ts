/**
 * PostgreSQL 17 failover slots, on the real stack: connector:deploy's slot.failover by server version
 * (connector.slotFailover `auto`), its warning about an existing non-failover slot, and the watchdog's and
 * `outbox status`'s view of a standby (watchdog.standby.databaseUrl).
 *
 * Also a file of the version matrix (jest.config.js): on 13 and the stack's 15 `auto` leaves slot.failover
 * out, on 18 Debezium creates a failover slot. The standby tests need a real streaming standby of the
 * primary the tests use (the stack's cluster profile: a PG17 primary and standby); give its URL in
 * OUTBOX_TEST_STANDBY_DATABASE_URL, else they are skipped and say why. Without one, the "standby" of the
 * other tests is the primary itself, which is honest only for what they assert: that a server not in
 * recovery is reported as not a standby, and that an unreachable one is a warning, never a failed poll.
 */
import { spawnSync } from 'node:child_process';
import type { OutboxConfig, OutboxOptions } from '../../src/config';
import { createConnectClient, deployConnector } from '../../src/connector';
import { provision } from '../../src/provision';
import { collectStatus } from '../../src/status';
import { createWatchdog } from '../../src/watchdog';
import { teardownConnectorTest } from '../support/connector-teardown';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomIdentifier, stackUrls, testPostgresPort, withClient, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

jest.setTimeout(180_000);

/** Why the standby tests cannot run here, or undefined: the URL must reach a server in recovery (read synchronously: jest defines tests synchronously). */
function standbyMissing(url: string | undefined): string | undefined {
  if (!url) return 'OUTBOX_TEST_STANDBY_DATABASE_URL is not set (a postgres:// URL of a PostgreSQL 17+ streaming standby of the test primary, e.g. a node of the cluster profile)';
  const script = `const { Client } = require('pg'); const c = new Client({ connectionString: process.env.URL, connectionTimeoutMillis: 5000 });
c.connect().then(() => c.query('SELECT pg_is_in_recovery() AS r')).then((q) => { process.stdout.write(String(q.rows[0].r)); return c.end(); }).catch((e) => process.stdout.write('error: ' + e.message));`;
  const probe = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 15_000, env: { ...process.env, URL: url } });
  const answer = probe.stdout.trim();
  if (answer === 'true') return undefined;
  return answer === 'false' ? 'the server at OUTBOX_TEST_STANDBY_DATABASE_URL is not in recovery (a primary: did the nodes fail over?)' : `the standby cannot be read (${answer || probe.error?.message})`;
}

const standbyUrl = process.env.OUTBOX_TEST_STANDBY_DATABASE_URL;
const missing = standbyMissing(standbyUrl);
// A skip that says so, in the run's output: never a silent pass.
if (missing) process.stderr.write(`\nfailover-slots.test.ts: the standby tests are SKIPPED: ${missing}\n\n`);

const id = randomIdentifier('fo');
let db: FreshDatabase;
let base: OutboxConfig;
let versionNum: number;

function configWith(overrides: OutboxOptions = {}): OutboxConfig {
  return testConfig(db.name, {
    ...overrides,
    roles: { cdc: base.roles.cdc, app: base.roles.app, monitor: base.roles.monitor, router: base.roles.router, relay: base.roles.relay, ...overrides.roles },
    connect: { url: process.env.OUTBOX_CONNECT_URL || stackUrls.connect },
    connector: {
      name: base.connector.name,
      slotName: base.connector.slotName,
      topicPrefix: id,
      topicReplacement: `t${id}.outbox.event.\${routedByValue}`,
      heartbeatIntervalMs: 1_000,
      deployTimeoutMs: 90_000,
      ...overrides.connector,
    },
    watchdog: { cluster: 'failover-test', ...overrides.watchdog },
  });
}


const slotFailover = (slot: string) =>
  withClient(db.name, async (c) => {
    if (versionNum < 170_000) return null;
    return ((await c.query('SELECT failover FROM pg_replication_slots WHERE slot_name = $1', [slot])).rows[0] as { failover: boolean } | undefined)?.failover ?? 'missing';
  });

/** Cleanup that never hides the test's own failure (after a failover the slot may be gone with the old primary). */
const dropIfThere = (slot: string) => withClient(db.name, (c) => c.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1', [slot]));

beforeAll(async () => {
  db = await freshDatabase('fo');
  base = testConfig(db.name);
  await provision(configWith());
  versionNum = await withClient(db.name, async (c) => Number((await c.query("SELECT current_setting('server_version_num') AS v")).rows[0].v));
});

afterAll(async () => {
  await teardownConnectorTest([configWith()], db, id);
});

describe('connector:deploy and slot.failover (connector.slotFailover auto)', () => {
  it('creates a failover slot where the server is 17+ (a plain one before, from the same config)', async () => {
    const config = configWith();
    const result = await deployConnector(config, {});
    expect(result.action).toBe('created');
    const stored = await createConnectClient(config.connect).getConfig(config.connector.name);
    // The same config for every server: Debezium applies it on 17+ and makes a plain slot before.
    expect(stored?.['slot.failover']).toBe('true');
    expect(await slotFailover(config.connector.slotName)).toBe(versionNum >= 170_000 ? true : null);
    expect((await deployConnector(config, {})).action).toBe('unchanged');
  });

  it('says so when the slot exists without failover on 17+ (Debezium does not alter it), with the ALTER_REPLICATION_SLOT way', async () => {
    const slot = randomIdentifier('plain');
    const config = configWith({ connector: { slotName: slot, name: `${base.connector.name}-plain`, topicPrefix: `${id}p` } });
    await withClient(db.name, (c) => c.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [slot]));
    try {
      // The slot has no stored offset here: that refusal is --force'd; the failover warning stays a warning.
      const result = await deployConnector(config, { force: true, dryRun: true });
      const warned = (result.warnings ?? []).some((w) => w.includes(`ALTER_REPLICATION_SLOT ${slot} ( FAILOVER true )`));
      expect(warned).toBe(versionNum >= 170_000);
    } finally {
      await dropIfThere(slot);
    }
  });
});

describe('a configured standby that is not one', () => {
  const sameServer = () => `postgres://postgres:postgres@127.0.0.1:${testPostgresPort()}/${db.name}`;

  it('the watchdog reports a primary given as the standby, and an unreachable standby, as warnings; its poll still works', async () => {
    for (const [url, expected] of [
      [sameServer(), 'not in recovery'],
      ['postgres://postgres:secret-pw@127.0.0.1:1/app', 'cannot be read'],
    ] as const) {
      const watchdog = createWatchdog({ config: configWith({ watchdog: { standby: { databaseUrl: url }, connectTimeoutMs: 2_000 } }), instant: true, deliver: false });
      try {
        const poll = await watchdog.pollOnce();
        expect(poll.ok).toBe(true);
        const row = watchdog.statuses().find((s) => s.rule === 'FailoverStandbyUnreadable');
        expect(row?.level).toBe('warning');
        expect(row?.summary).toContain(expected);
        expect(row?.summary).not.toContain('secret-pw');
      } finally {
        await watchdog.stop(0);
      }
    }
  });

  it('`outbox status` says `not configured` without the setting, and reads the standby section with it', async () => {
    const without = await collectStatus(configWith());
    expect(without.slots.ok && without.slots.standby).toEqual({ configured: false });
    const withIt = await collectStatus(configWith({ watchdog: { standby: { databaseUrl: sameServer() } } }));
    expect(withIt.slots.ok && withIt.slots.standby).toMatchObject({ configured: true, inRecovery: false, target: `127.0.0.1:${testPostgresPort()}/${db.name}` });
  });
});

(missing ? describe.skip : describe)('a real PostgreSQL 17 standby (OUTBOX_TEST_STANDBY_DATABASE_URL)', () => {
  const standbyConfig = (overrides: OutboxOptions = {}) => configWith({ ...overrides, watchdog: { standby: { databaseUrl: standbyUrl }, ...overrides.watchdog } });

  it('a failover slot of the primary becomes ready on the standby: no FailoverSlotNotReady, and status shows it synced', async () => {
    const slot = randomIdentifier('fslot');
    await withClient(db.name, (c) => c.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)", [slot]));
    const watchdog = createWatchdog({ config: standbyConfig(), instant: true, deliver: false });
    try {
      // The standby's sync worker copies it on its own cycle, as a temporary slot until the primary's slot has moved past
      // the position the standby reserved for it: a slot nobody consumes stays temporary there. So it is consumed here
      // (advanced to the current WAL position, behind a standby snapshot that gives it something to move over), as
      // Debezium's heartbeats move the connector's slot.
      await waitsUpTo(120_000, 2_000)(`failover slot ${slot} synced on the standby`, async () => {
        await withClient(db.name, async (c) => {
          await c.query('SELECT pg_log_standby_snapshot()');
          await c.query('SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())', [slot]);
        });
        await watchdog.pollOnce();
        const statuses = watchdog.statuses();
        return !statuses.some((s) => s.rule === 'FailoverSlotNotReady' && s.slot === slot) && statuses.every((s) => s.rule !== 'FailoverStandbyUnreadable');
      });
      const status = await collectStatus(standbyConfig());
      const readiness = status.slots.ok && status.slots.standby.configured ? status.slots.standby.slots.find((r) => r.slotName === slot) : undefined;
      expect(readiness).toMatchObject({ readiness: 'ready', synced: true, temporary: false, invalidationReason: null });
    } finally {
      await watchdog.stop(0);
      await dropIfThere(slot);
    }
  });

  it("the connector's slot without failover, with a standby streaming, is SlotFailoverDisabled (WARNING)", async () => {
    const slot = randomIdentifier('nofo');
    await withClient(db.name, (c) => c.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [slot]));
    const watchdog = createWatchdog({ config: standbyConfig({ connector: { slotName: slot } }), instant: true, deliver: false });
    try {
      await watchdog.pollOnce();
      const row = watchdog.statuses().find((s) => s.rule === 'SlotFailoverDisabled');
      expect(row).toMatchObject({ slot, level: 'warning' });
    } finally {
      await watchdog.stop(0);
      await dropIfThere(slot);
    }
  });
});
