/**
 * Three outboxes in two databases behind one config file (docs/multi-outbox.md), through the CLI on the
 * real stack: `alpha` (database A, schema public), `beta` (database A, schema tenant_b, its own
 * publication), `gamma` (database B). `db:provision` and `connector:deploy` set up all three, each with
 * its own slot and Debezium connector; events written to each reach one router, which applies every one
 * once, in per-key order; `outbox status`, `watchdog --once`, `outbox:cleanup --once` and the watchdog
 * service report each outbox. Then gamma's database becomes unreachable (OUTBOX__GAMMA__PGPORT pointing
 * at a closed port): every command still does alpha's and beta's work, names gamma as failed, and exits
 * non-zero; the watchdog service keeps watching alpha and beta and reports gamma's poll failing.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pool } from 'pg';
import { PROJECT_ROOT } from '../../scripts/stack/paths';
import { createCodec, JSON_CONTENT_TYPE } from '../../src/codec';
import { loadConfigWithSources, type NamedOutbox } from '../../src/config';
import { deleteConnector } from '../../src/connector';
import { createPool } from '../../src/db';
import { createOutboxWriter } from '../../src/producer';
import { freshDatabase, randomIdentifier, withClient, type FreshDatabase } from '../support/stack-env';
import { dropRolesAndTopics, randomRoleNames, rolesYaml } from '../support/shared-roles';
import { waitsUpTo } from '../support/until';

jest.setTimeout(300_000);
const until = waitsUpTo(120_000, 500);
const MAIN = join(PROJECT_ROOT, 'dist/cli/main.js');
const NAMES = ['alpha', 'beta', 'gamma'] as const;
const KEYS = ['k1', 'k2', 'k3'];
const PER_KEY = 10;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `outbox <args>` to its end (or kills it after `timeoutMs`). */
function cli(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 150_000): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [MAIN, '--log-format', 'json', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** SIGTERM, and the exit (at once when it has exited already). */
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

/** Awaits `waiting`; when it fails, the error carries the end of a child's log. */
async function withLog<T>(log: () => string, waiting: Promise<T>): Promise<T> {
  try {
    return await waiting;
  } catch (error) {
    throw new Error(`${(error as Error).message}\nthe child's log:\n${log().slice(-3000)}`, { cause: error });
  }
}

describe('three outboxes in two databases, one config', () => {
  let dbA: FreshDatabase;
  let dbB: FreshDatabase;
  let dir: string;
  let configFile: string;
  let outboxes: NamedOutbox[];
  let prefix: string;
  let poolA: Pool;
  const roles = randomRoleNames();
  /** gamma's database unreachable: its port, a closed one. */
  const GAMMA_DOWN = { OUTBOX__GAMMA__PGPORT: '1' };

  beforeAll(async () => {
    dbA = await freshDatabase('multi_a');
    dbB = await freshDatabase('multi_b');
    prefix = randomIdentifier('mo').replace(/_/g, '');
    dir = mkdtempSync(join(tmpdir(), 'outbox-multi-'));
    const connector = (name: string) =>
      `{ name: ${prefix}-${name}, slotName: ${prefix}_${name}, topicPrefix: ${prefix}-${name}, topicReplacement: '${prefix}.${name}.\${routedByValue}', heartbeatIntervalMs: 1000 }`;
    configFile = join(dir, 'outbox.yaml');
    writeFileSync(
      configFile,
      [
        `database: { database: ${dbA.name} }`,
        rolesYaml(roles),
        `router: { consumer: ${prefix}, inboxRetentionMs: 0 }`,
        'outboxes:',
        `  alpha: { connector: ${connector('alpha')} }`,
        `  beta: { outbox: { schema: tenant_b, publication: tenant_b_publication }, connector: ${connector('beta')} }`,
        `  gamma: { database: { database: ${dbB.name} }, connector: ${connector('gamma')} }`,
        '',
      ].join('\n'),
    );
    outboxes = [...loadConfigWithSources({ file: configFile, env: {} }).outboxes];
    // The router's handler records what it applied, in the router's database (A), in the inbox transaction.
    writeFileSync(
      join(dir, 'handlers.js'),
      "module.exports = { note: { Noted: async (e, ctx) => { await ctx.tx.query('INSERT INTO applied (outbox, key, seq, event_id) VALUES ($1, $2, $3, $4)', [e.payload.outbox, e.aggregateId, e.payload.seq, e.id]); } } };\n",
    );
    poolA = createPool(outboxes[0]!.config.database, { max: 2 });
    await poolA.query('CREATE TABLE applied (n bigserial PRIMARY KEY, outbox text NOT NULL, key text NOT NULL, seq int NOT NULL, event_id text NOT NULL)');
  });

  afterAll(async () => {
    for (const { config } of outboxes ?? []) await deleteConnector(config, { dropSlot: true, force: true, timeoutMs: 30_000 }).catch(() => {});
    await poolA?.end();
    await dbA?.drop();
    await dbB?.drop();
    await dropRolesAndTopics(roles, prefix);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('db:provision and connector:deploy set up each outbox with its own slot and connector', async () => {
    const provisioned = await cli(['db:provision', '--config', configFile, '--json']);
    expect(provisioned.stderr).not.toContain('failed');
    expect(provisioned.code).toBe(0);
    const reports = JSON.parse(provisioned.stdout) as { outboxes: Array<{ outbox: string; ok: boolean; result: { dryRun: boolean } }> };
    expect(reports.outboxes.map((o) => [o.outbox, o.ok])).toEqual(NAMES.map((n) => [n, true]));
    // beta's tables are in its own schema of database A.
    const tables = await poolA.query<{ t: string }>("SELECT to_regclass('tenant_b.outbox')::text AS t");
    expect(tables.rows[0]?.t).toBe('tenant_b.outbox');

    const deployed = await cli(['connector:deploy', '--config', configFile, '--json']);
    expect(deployed.code).toBe(0);
    const results = JSON.parse(deployed.stdout) as { outboxes: Array<{ outbox: string; ok: boolean; result: { action: string; connector: string } }> };
    expect(results.outboxes.map((o) => [o.outbox, o.ok, o.result.action, o.result.connector])).toEqual(NAMES.map((n) => [n, true, 'created', `${prefix}-${n}`]));
    const slots = await withClient('postgres', (c) => c.query<{ slot_name: string; database: string }>('SELECT slot_name, database FROM pg_replication_slots WHERE slot_name LIKE $1 ORDER BY 1', [`${prefix}%`]));
    expect(slots.rows).toEqual([
      { slot_name: `${prefix}_alpha`, database: dbA.name },
      { slot_name: `${prefix}_beta`, database: dbA.name },
      { slot_name: `${prefix}_gamma`, database: dbB.name },
    ]);
  });

  it("one router reads all three outboxes' topics and applies every event once, in per-key order", async () => {
    // Each outbox gets PER_KEY events on each key, written by the library's writer as the application would.
    for (const { name, config } of outboxes) {
      const pool = createPool(config.database, { max: 1 });
      const client = await pool.connect();
      const writer = createOutboxWriter({ outbox: config.outbox, codec: createCodec({ registry: config.registry }), contentType: JSON_CONTENT_TYPE });
      try {
        for (let seq = 0; seq < PER_KEY; seq++) {
          await client.query('BEGIN');
          await writer.writeEvents(client, KEYS.map((key) => ({ aggregateType: 'note', aggregateId: key, type: 'Noted', payload: { outbox: name, seq } })));
          await client.query('COMMIT');
        }
      } finally {
        client.release();
        await pool.end();
      }
    }
    const router = spawn(process.execPath, [MAIN, '--log-format', 'json', 'router', '--config', configFile, '--handlers', join(dir, 'handlers.js'), '--metrics-port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let routerLog = '';
    router.stdout.on('data', (d: Buffer) => (routerLog += d.toString()));
    router.stderr.on('data', (d: Buffer) => (routerLog += d.toString()));
    const total = NAMES.length * KEYS.length * PER_KEY;
    try {
      await withLog(() => routerLog, until('the router applied every event', async () => Number((await poolA.query<{ n: string }>('SELECT count(*) AS n FROM applied')).rows[0]?.n), (n) => n >= total));
      await new Promise((r) => setTimeout(r, 2_000));
    } finally {
      await stopChild(router);
    }
    const { rows } = await poolA.query<{ outbox: string; key: string; seq: number; event_id: string }>('SELECT outbox, key, seq, event_id FROM applied ORDER BY n');
    expect(rows).toHaveLength(total);
    expect(new Set(rows.map((r) => r.event_id)).size).toBe(total);
    for (const name of NAMES) {
      for (const key of KEYS) {
        expect(rows.filter((r) => r.outbox === name && r.key === key).map((r) => r.seq)).toEqual(Array.from({ length: PER_KEY }, (_, i) => i));
      }
    }
    // Its subscription named each outbox's topic, and nothing else.
    expect(routerLog).toContain(`${prefix}.gamma.note`);
  });

  it('status, watchdog --once and outbox:cleanup --once report each outbox', async () => {
    const status = await cli(['status', '--config', configFile, '--json', '--group', prefix]);
    const parsed = JSON.parse(status.stdout) as { outboxes: Array<{ outbox: string; ok: boolean; result: { connector: { ok: boolean; name?: string; state?: string } } }> };
    expect(parsed.outboxes.map((o) => [o.outbox, o.ok])).toEqual(NAMES.map((n) => [n, true]));
    expect(JSON.stringify(parsed.outboxes[2]?.result)).toContain(`${prefix}-gamma`);

    const once = await cli(['watchdog', '--once', '--config', configFile, '--json']);
    const checks = JSON.parse(once.stdout) as { outboxes: Array<{ outbox: string; ok: boolean; result: { ok: boolean; slots: Array<{ slotName: string }> } }> };
    expect(checks.outboxes.map((o) => [o.outbox, o.ok, o.result.ok])).toEqual(NAMES.map((n) => [n, true, true]));
    for (const [i, name] of NAMES.entries()) expect(checks.outboxes[i]?.result.slots.map((s) => s.slotName)).toContain(`${prefix}_${name}`);

    const cleanup = await cli(['outbox:cleanup', '--once', '--config', configFile]);
    expect(cleanup.code).toBe(0);
    for (const name of NAMES) expect(cleanup.stdout).toContain(`outbox:cleanup [${name}]:`);
  });

  it("with gamma's database unreachable, every command still does alpha's and beta's work and names gamma", async () => {
    const deployed = await cli(['connector:deploy', '--config', configFile, '--json'], GAMMA_DOWN);
    expect(deployed.code).toBe(1);
    expect(deployed.stderr).toContain('1 of 3 outboxes failed: gamma');
    const results = JSON.parse(deployed.stdout) as { outboxes: Array<{ outbox: string; ok: boolean; result?: { action: string }; error?: { code: string } }> };
    expect(results.outboxes.map((o) => [o.outbox, o.ok, o.result?.action])).toEqual([
      ['alpha', true, 'unchanged'],
      ['beta', true, 'unchanged'],
      ['gamma', false, undefined],
    ]);

    const provisioned = await cli(['db:provision', '--config', configFile], GAMMA_DOWN);
    expect(provisioned.code).toBe(1);
    expect(provisioned.stdout).toMatch(/== outbox alpha ==[\s\S]*committed[\s\S]*== outbox beta ==[\s\S]*committed[\s\S]*== outbox gamma ==\n {2}FAILED: /);

    const once = await cli(['watchdog', '--once', '--config', configFile], GAMMA_DOWN);
    expect(once.code).toBe(3); // UNKNOWN: gamma could not be checked
    expect(once.stdout).toMatch(/== outbox alpha ==[\s\S]*OK[\s\S]*== outbox gamma ==[\s\S]*UNKNOWN/);

    const cleanup = await cli(['outbox:cleanup', '--once', '--config', configFile], GAMMA_DOWN);
    expect(cleanup.code).toBe(1);
    expect(cleanup.stdout).toContain('outbox:cleanup [alpha]:');
    expect(cleanup.stdout).toContain('outbox:cleanup [beta]:');
    expect(cleanup.stderr).toContain('outbox:cleanup of outbox gamma failed');

    const status = await cli(['status', '--config', configFile, '--json', '--timeout', '3000'], GAMMA_DOWN);
    const parsed = JSON.parse(status.stdout) as { outboxes: Array<{ outbox: string; ok: boolean; result: { verdict: { level: string } } }> };
    expect(parsed.outboxes.map((o) => o.outbox)).toEqual([...NAMES]);
    expect(parsed.outboxes[2]?.result.verdict.level).not.toBe('ok');
    expect(status.code).toBeGreaterThan(0);
  });

  it('the watchdog service watches every outbox in one process, with each one’s series labelled, and gamma down stalls no other', async () => {
    const child = spawn(process.execPath, [MAIN, '--log-format', 'json', 'watchdog', '--config', configFile, '--metrics-port', '0', '--interval', '1000'], {
      env: { ...process.env, ...GAMMA_DOWN },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr.on('data', (d: Buffer) => (log += d.toString()));
    try {
      await withLog(() => log, until('the watchdog started', () => /"metrics":"(http:[^"]+)"/.test(log)));
      const url = (/"metrics":"(http:[^"]+)"/.exec(log) as RegExpExecArray)[1] as string;
      const metric = (text: string, name: string, outbox: string) => new RegExp(`^${name}\\{[^}]*outbox="${outbox}"[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1];
      let text = '';
      await until(
        'poll_success 1 for alpha and beta, 0 for gamma',
        async () => {
          text = await (await fetch(url)).text();
          return NAMES.map((n) => metric(text, 'outbox_watchdog_poll_success', n)).join(',');
        },
        (seen) => seen === '1,1,0',
      );
      expect(text).toMatch(new RegExp(`pg_replication_slots_active\\{[^}]*slot_name="${prefix}_alpha"[^}]*outbox="alpha"`));
      expect(text.match(/^# TYPE outbox_watchdog_poll_success gauge$/gm)).toHaveLength(1);
      const health = (await (await fetch(url.replace('/metrics', '/healthz'))).json()) as { outboxes: Record<string, { healthy: boolean }> };
      expect(Object.entries(health.outboxes).map(([n, h]) => [n, h.healthy])).toEqual([
        ['alpha', true],
        ['beta', true],
        ['gamma', false],
      ]);
    } finally {
      await stopChild(child);
    }
  });
});
