import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pool } from 'pg';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { PROJECT_ROOT } from '../../scripts/stack/paths';
import { createCodec, topicForReplacement, JSON_CONTENT_TYPE } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { createConnectClient, deployConnector } from '../../src/connector';
import { createPool } from '../../src/db';
import { createLogger } from '../../src/log';
import { createOutboxWriter, type OutboxEvent, type OutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import { createRouter, createRouterMetrics, startHealthServer, type HealthServer, type Router } from '../../src/router';
import { createWatchdog, watchdogHealthBody, type Watchdog } from '../../src/watchdog';
import { teardownConnectorTest } from '../support/connector-teardown';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

jest.setTimeout(300_000);

/**
 * `outbox console` in a real browser (Debian's Chromium driven by playwright-core) against the real
 * stack: events written to the outbox, published by Debezium, applied by a router whose handler fails
 * on a poison event, the console run as the CLI runs it. Screenshots of the main views are written to
 * reports/console/ (looked at when the console changes; the test asserts on the DOM).
 */

const CHROMIUM = process.env.OUTBOX_TEST_CHROMIUM ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];
const SHOTS = join(PROJECT_ROOT, 'reports', 'console');
const TOKEN = `tok-${randomBytes(16).toString('hex')}`;
/** Config secrets that must never reach the page or the API. */
const SECRETS = { kafkaKey: `kafka-key-${randomBytes(8).toString('hex')}`, appRole: `app-role-${randomBytes(8).toString('hex')}` };
const SCRIPT = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">`;
const until = waitsUpTo(90_000, 250);

interface RunningConsole {
  url: string;
  child: ChildProcess;
  log: () => string;
}

/** `outbox console` as a user runs it, with a config file; resolves once it logged its URL. */
async function startConsole(configFile: string, extra: string[] = []): Promise<RunningConsole> {
  const child = spawn(process.execPath, [join(PROJECT_ROOT, 'dist/cli/main.js'), '--log-format', 'json', 'console', '--config', configFile, '--port', '0', ...extra], {
    env: { ...process.env, OUTBOX_CONSOLE_TOKEN: TOKEN },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const url = await until(`the console to start (${extra.join(' ')})`, () => {
    if (child.exitCode !== null) throw new Error(`outbox console exited ${child.exitCode}:\n${out}`);
    for (const line of out.split('\n')) {
      try {
        const entry = JSON.parse(line) as { msg?: string; console?: string };
        if (entry.msg === 'console started' && entry.console) return entry.console;
      } catch {
        // not a log line
      }
    }
    return undefined;
  });
  return { url, child, log: () => out };
}

async function stopConsole(c: RunningConsole | undefined): Promise<void> {
  if (!c || c.child.exitCode !== null) return;
  const exited = new Promise((resolve) => c.child.once('exit', resolve));
  c.child.kill('SIGTERM');
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10_000))]);
  if (c.child.exitCode === null) c.child.kill('SIGKILL');
}

/** A raw HTTP request (fetch cannot set Host). */
function raw(url: string, options: { method?: string; headers?: Record<string, string>; body?: string }): Promise<{ status: number; body: string; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? 'GET', headers: options.headers }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

describe('outbox console, in Chromium, on the real stack', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let writer: OutboxWriter;
  let router: Router;
  let routerHttp: HealthServer;
  let watchdog: Watchdog;
  let watchdogHttp: HealthServer;
  let rw: RunningConsole;
  let ro: RunningConsole;
  let context: BrowserContext;
  let page: Page;
  let work: string;
  let auditLog: string;
  let prefix: string;
  let fixed = false;
  const poisonKey = `order-poison-${randomUUID().slice(0, 8)}`;
  const unknownKey = `order-unknown-${randomUUID().slice(0, 8)}`;
  let poisonId: string;
  let unknownId: string;
  const pageErrors: string[] = [];
  const dialogs: string[] = [];

  /** A dialog's backdrop covers the viewport only: a confirmation is shot as the operator sees it. */
  const shot = async (name: string, fullPage = true) => {
    const path = join(SHOTS, `${name}.png`);
    await page.screenshot({ path, fullPage });
    process.stderr.write(`[console test] screenshot ${path}\n`);
  };

  /** Events written as an application does: in its own transaction. Their ids. */
  const write = async (events: OutboxEvent[]): Promise<string[]> => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const written = await writer.writeEvents(client, events);
      await client.query('COMMIT');
      return written.map((w) => w.id);
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    } finally {
      client.release();
    }
  };

  const effects = async (id: string) => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM effects WHERE message_id = $1', [id])).rows[0]?.n;
  const parkedRows = async (key: string) => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM public.inbox_parked WHERE aggregate_id = $1', [key])).rows[0]?.n;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`The console's browser test needs Chromium at ${CHROMIUM}: apt-get install chromium (.ci/run installs it), or set OUTBOX_TEST_CHROMIUM.`);
    mkdirSync(SHOTS, { recursive: true });
    work = mkdtempSync(join(tmpdir(), 'outbox-console-test-'));
    auditLog = join(work, 'audit.jsonl');
    db = await freshDatabase('console');
    prefix = randomName('t').replace(/-/g, '');
    const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
    config = testConfig(db.name, {
      connector: { topicReplacement, topicPrefix: prefix },
      router: { consumer: `c-${prefix}`, maxAttempts: 2, backoff: { initialDelayMs: 5, maxDelayMs: 20 } },
      kafka: { ssl: { keyPassword: SECRETS.kafkaKey } },
      roles: { appPassword: SECRETS.appRole },
      watchdog: { intervalMs: 500, rateWindowMs: 5_000, rules: { retainedBytes: { warning: 1, critical: 1024 ** 4 }, retainedForMs: 0 } },
    });
    await provision(config);
    pool = createPool(config.database, { max: 4 });
    await pool.query('CREATE TABLE effects (seq bigserial PRIMARY KEY, message_id uuid NOT NULL, aggregate_id text NOT NULL, reason text NOT NULL)');
    const codec = createCodec({ registry: config.registry, autoRegister: true, topicFor: topicForReplacement(topicReplacement) });
    writer = createOutboxWriter({ outbox: config.outbox, codec });
    expect((await deployConnector(config)).action).toBe('created');

    // The router, with its metrics served for the latency chart; its handler fails on "poison" until fixed.
    const metrics = createRouterMetrics();
    router = createRouter({
      config,
      handlers: {
        order: {
          OrderCancelled: async (event, { tx }) => {
            const reason = String((event.payload as { reason: string }).reason);
            if (reason.startsWith('poison') && !fixed) throw new Error(`cannot cancel ${event.aggregateId}: ${reason}`);
            await tx.query('INSERT INTO effects (message_id, aggregate_id, reason) VALUES ($1, $2, $3)', [event.id, event.aggregateId, reason]);
          },
        },
      },
      logger: createLogger({ level: 'silent' }),
      onEvent: metrics.onEvent,
      parkedMetricsIntervalMs: 1_000,
    });
    routerHttp = await startHealthServer({ host: '127.0.0.1', port: 0, registry: metrics.registry, health: () => ({ healthy: true, details: {} }) });
    await router.start();

    // The watchdog on the connector's slot, with a threshold every slot passes: one alert fires.
    watchdog = createWatchdog({ config: { ...config, watchdog: { ...config.watchdog, slots: [config.connector.slotName] } }, deliver: false });
    watchdog.start();
    watchdogHttp = await startHealthServer({ host: '127.0.0.1', port: 0, registry: watchdog.metrics.registry, health: () => watchdogHealthBody(watchdog) });

    // The console's config file: this test's config (as JSON, which YAML reads), pointed at those two.
    const file = join(work, 'outbox.json');
    const settings = JSON.parse(JSON.stringify(config)) as Record<string, Record<string, unknown>>;
    settings.watchdog = { ...settings.watchdog, metricsPort: watchdogHttp.port };
    settings.console = {
      ...settings.console,
      sensitiveFields: ['customer.email', 'card'],
      sampleIntervalMs: 1_000,
      auditLog,
      routerMetricsUrl: `http://127.0.0.1:${routerHttp.port}/metrics`,
    };
    writeFileSync(file, JSON.stringify(settings, null, 2));
    [rw, ro] = await Promise.all([startConsole(file), startConsole(file, ['--read-only'])]);

    context = await launch('chromium');
    page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
  });

  /** Chromium with a fresh profile (--user-data-dir, which playwright passes for a persistent context). */
  const launch = (profile: string) => chromium.launchPersistentContext(join(work, profile), { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, viewport: { width: 1400, height: 1000 } });

  afterAll(async () => {
    await context?.close();
    await Promise.all([stopConsole(rw), stopConsole(ro)]);
    await router?.stop();
    await watchdog?.stop(0);
    await Promise.all([routerHttp?.close(), watchdogHttp?.close()]);
    await pool?.end();
    if (config) await teardownConnectorTest([config], db, prefix);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  async function signIn(p: Page, url: string): Promise<void> {
    await p.goto(url);
    await p.fill('[data-testid=token]', TOKEN);
    await p.click('[data-testid=sign-in-submit]');
    await p.waitForSelector('[data-testid=overview]');
  }

  it('signs in with the token and shows the pipeline: connector, slot, backlog, groups, the watchdog\'s alert, charts', async () => {
    // Traffic first, so the charts and the consumer group have something to show.
    await write(
      Array.from({ length: 5 }, (_, i) => ({ aggregateType: 'order', aggregateId: `order-ok-${i}`, type: 'OrderCancelled', payload: { orderId: `order-ok-${i}`, reason: 'changed mind', cancelledAt: new Date() } })),
    );
    await until('the 5 good events applied', async () => (await pool.query('SELECT count(*)::int AS n FROM effects')).rows[0].n === 5);

    await signIn(page, rw.url);
    await expect(page.locator('[data-testid=connector-state]').textContent()).resolves.toBe('RUNNING');
    await until('the slot sampled with its wal_status', async () => (await page.locator('[data-testid=wal-status]').textContent()) === 'reserved');
    await until('the watchdog alert shown', async () => /SlotRetainedHigh/.test((await page.locator('[data-testid=watchdog]').textContent()) ?? ''));
    await until('the router group listed per partition', async () => page.locator('[data-testid=groups] tbody tr').count(), (n) => n >= 1);
    await expect(page.locator('[data-testid=groups]').textContent()).resolves.toContain(`c-${prefix}`);
    // Charts get a point per sample.
    await until('a few samples charted', async () => /\((\d+) samples\)/.exec((await page.locator('[data-testid=chart-lag] figcaption').textContent()) ?? '')?.[1], (n) => Number(n) >= 3);
    expect(await page.locator('[data-testid=charts] canvas').count()).toBeGreaterThanOrEqual(3);
    await shot('1-overview');
    // Sizes and rates are rounded for reading: a retained-WAL growth of 506.02944554581586 B/s showed raw
    // once. The page's own formatter, as the browser loads it (a string, so no bundler rewrites the import).
    const formatted = await page.evaluate("import('/assets/format.js').then((f) => [f.bytes(506.02944554581586), f.bytes(1536), f.bytes(null), f.duration(3_725_000)])");
    expect(formatted).toEqual(['506 B', '1.5 KiB', '—', '1 h 2 min']);
    expect(pageErrors).toEqual([]);
  });

  it('a poison event appears with its decoded payload and error; a script in it stays text; sensitive fields are masked', async () => {
    [poisonId, unknownId] = await write([
      { aggregateType: 'order', aggregateId: poisonKey, type: 'OrderCancelled', payload: { orderId: poisonKey, reason: `poison ${SCRIPT}`, cancelledAt: new Date() } },
      {
        aggregateType: 'order',
        aggregateId: unknownKey,
        type: 'OrderNoted',
        contentType: JSON_CONTENT_TYPE,
        headers: { tenant: 'acme', card: 'header-card-4242' },
        payload: { orderId: unknownKey, customer: { email: 'alice@example.com', name: 'Alice' }, card: '4111 1111 1111 1111', note: '<b>not bold</b>' },
      },
    ]) as [string, string];
    await until('both parked', async () => (await parkedRows(poisonKey)) === 1 && (await parkedRows(unknownKey)) === 1);

    await page.goto(`${rw.url}#/dead-letters?aggregateType=order`);
    const poison = page.locator(`[data-testid=letter][data-id="${poisonId}"]`);
    const unknown = page.locator(`[data-testid=letter][data-id="${unknownId}"]`);
    await until('both letters listed', async () => (await poison.count()) === 1 && (await unknown.count()) === 1);

    // The Avro payload decoded, the error and its code, the original position.
    const payload = (await poison.locator('[data-testid=payload]').textContent()) ?? '';
    expect(JSON.parse(payload)).toMatchObject({ orderId: poisonKey, reason: `poison ${SCRIPT}` });
    expect(payload).toContain('<script>window.__pwned=1</script>');
    await expect(poison.locator('[data-testid=letter-error]').textContent()).resolves.toContain(`cannot cancel ${poisonKey}: poison <script>`);
    await expect(poison.locator('[data-testid=letter-error-code]').textContent()).resolves.toBe('HANDLER_FAILED');
    await expect(poison.locator('[data-testid=letter-state]').textContent()).resolves.toBe('parked');
    await expect(poison.textContent()).resolves.toContain(`from ${prefix}.outbox.event.order partition`);
    await expect(poison.textContent()).resolves.toContain('2 attempt(s)');

    // The script stayed text: nothing ran, no element was made of it.
    expect(await page.evaluate(() => (globalThis as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await page.locator('#app img, #app script, #app b').count()).toBe(0);
    expect(dialogs).toEqual([]);

    // The JSON letter: its sensitive fields masked in the page, in its headers, and in the API.
    const masked = (await unknown.locator('[data-testid=payload]').textContent()) ?? '';
    expect(JSON.parse(masked)).toEqual({ orderId: unknownKey, customer: { email: '[masked]', name: 'Alice' }, card: '[masked]', note: '<b>not bold</b>' });
    await unknown.locator('summary').click();
    const headers = (await unknown.locator('table.headers').textContent()) ?? '';
    expect(headers).toContain('[masked]');
    expect(headers).not.toContain('header-card-4242');
    const api = await (await fetch(`${rw.url}api/dead-letters?aggregateType=order&state=all`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    for (const hidden of ['alice@example.com', '4111 1111 1111 1111', 'header-card-4242']) {
      expect(api).not.toContain(hidden);
      expect(await page.content()).not.toContain(hidden);
    }
    await shot('2-dead-letters');
    expect(pageErrors).toEqual([]);
  });

  it('read-only mode shows no action anywhere and refuses one', async () => {
    const other = await context.newPage();
    try {
      await signIn(other, ro.url);
      await other.waitForSelector('[data-testid=read-only]');
      await other.waitForSelector('[data-testid=connector-state]');
      expect(await other.locator('[data-action], [data-testid=confirm]').count()).toBe(0);
      await other.goto(`${ro.url}#/dead-letters?aggregateType=order`);
      await until('the letters listed read-only', async () => other.locator('[data-testid=letter]').count(), (n) => n >= 2);
      expect(await other.locator('[data-action]').count()).toBe(0);
      await other.goto(`${ro.url}#/parked`);
      await until('the parked keys listed read-only', async () => other.locator('[data-testid=parked-key]').count(), (n) => n >= 2);
      expect(await other.locator('[data-action]').count()).toBe(0);
      await other.screenshot({ path: join(SHOTS, '3-read-only-parked.png'), fullPage: true });
      // Even a well-formed request with credentials and the session's token: refused.
      const refused = await other.evaluate(async () => {
        const session = (await (await fetch('/api/session')).json()) as { csrfToken: string | null };
        const res = await fetch('/api/actions', { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': session.csrfToken ?? 'none' }, body: JSON.stringify({ action: 'connector-pause' }) });
        return { status: res.status, body: (await res.json()) as { error: { code: string } }, csrf: session.csrfToken };
      });
      expect(refused).toMatchObject({ status: 403, body: { error: { code: 'CONSOLE_FORBIDDEN' } }, csrf: null });
      const status = await createConnectClient(config.connect).status(config.connector.name);
      expect(status?.connector.state).toBe('RUNNING');
    } finally {
      await other.close();
    }
  });

  it('an action without credentials, without the CSRF token, from another origin or by another Host name is refused', async () => {
    // In the browser, not signed in (a context of its own): the action is refused and nothing is audited.
    const anonymous = await launch('chromium-anonymous');
    try {
      const p = await anonymous.newPage();
      await p.goto(rw.url);
      await p.waitForSelector('[data-testid=sign-in]');
      const res = await p.evaluate(async (base) => {
        const r = await fetch(`${base}api/actions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ action: 'connector-pause' }) });
        const read = await fetch(`${base}api/dead-letters?aggregateType=order`);
        return { action: r.status, code: ((await r.json()) as { error: { code: string } }).error.code, read: read.status };
      }, rw.url);
      expect(res).toEqual({ action: 401, code: 'CONSOLE_UNAUTHENTICATED', read: 401 });
    } finally {
      await anonymous.close();
    }
    // Signed in, but without the CSRF token.
    const noCsrf = await page.evaluate(async () => (await fetch('/api/actions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ action: 'connector-pause' }) })).status);
    expect(noCsrf).toBe(403);
    // A wrong token.
    const bearer = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const wrongToken = await raw(`${rw.url}api/actions`, { method: 'POST', headers: { ...bearer, authorization: 'Bearer not-the-token-at-all' }, body: '{"action":"connector-pause"}' });
    expect(wrongToken.status).toBe(401);
    // The right token and CSRF token, sent from another site's page.
    const session = JSON.parse((await raw(`${rw.url}api/session`, { headers: bearer })).body) as { csrfToken: string };
    const crossSite = await raw(`${rw.url}api/actions`, { method: 'POST', headers: { ...bearer, 'x-csrf-token': session.csrfToken, origin: 'http://evil.example' }, body: '{"action":"connector-pause"}' });
    expect([crossSite.status, JSON.parse(crossSite.body).error.code]).toEqual([403, 'CONSOLE_FORBIDDEN']);
    // DNS rebinding: another name for this address.
    const rebound = await raw(`${rw.url}api/overview`, { headers: { ...bearer, host: 'evil.example' } });
    expect(rebound.status).toBe(421);
    expect(readFileSync(auditLog, 'utf8')).toBe('');
    const status = await createConnectClient(config.connect).status(config.connector.name);
    expect(status?.connector.state).toBe('RUNNING');
  });

  it('the handler fixed, the poison letter replayed from the page: applied once, and it leaves the list', async () => {
    fixed = true;
    await page.goto(`${rw.url}#/dead-letters?aggregateType=order`);
    const poison = page.locator(`[data-testid=letter][data-id="${poisonId}"]`);
    await until('the poison letter listed', async () => poison.count(), (n) => n === 1);
    await poison.locator('[data-testid=replay-letter]').click();
    const dialog = page.locator('dialog[data-testid=confirm]');
    await until('the dry run in the confirmation', async () => dialog.locator('[data-testid=would-replay]').textContent(), (t) => t === '1');
    await expect(dialog.locator('[data-testid=confirm-preview]').textContent()).resolves.toContain(poisonId);
    await shot('4-confirm-replay', false);
    expect(await effects(poisonId)).toBe(0);
    await dialog.locator('[data-testid=confirm-run]').click();
    await until('the replay done', async () => dialog.locator('[data-testid=replayed]').textContent(), (t) => t === 'Replayed 1 dead letter(s).');
    await expect(dialog.locator('[data-testid=confirm-result]').textContent()).resolves.toContain('Every replayed key was released.');
    await dialog.locator('[data-testid=confirm-close]').click();
    await until('the letter gone from the outstanding list', async () => poison.count(), (n) => n === 0);
    expect(await effects(poisonId)).toBe(1);
    expect(await parkedRows(poisonKey)).toBe(0);
    // Still once after the router had time to see any redelivery; and shown as applied among all letters.
    await new Promise((r) => setTimeout(r, 3_000));
    expect(await effects(poisonId)).toBe(1);
    const all = JSON.parse(await (await fetch(`${rw.url}api/dead-letters?aggregateType=order&state=all&key=${poisonKey}`, { headers: { authorization: `Bearer ${TOKEN}` } })).text()) as { letters: Array<{ id: string; state: string }> };
    expect(all.letters.filter((l) => l.id === poisonId).map((l) => l.state)).toEqual(['applied']);
    expect(pageErrors).toEqual([]);
  });

  it('a parked key released from the page leaves the parked keys', async () => {
    await page.goto(`${rw.url}#/parked`);
    const row = page.locator(`[data-testid=parked-key][data-key="${unknownKey}"]`);
    await until('the parked key listed', async () => row.count(), (n) => n === 1);
    await expect(row.textContent()).resolves.toContain(unknownId);
    await shot('5-parked');
    await row.locator('[data-testid=release-key]').click();
    const dialog = page.locator('dialog[data-testid=confirm]');
    await until('the release preview', async () => dialog.locator('[data-testid=would-release]').textContent(), (t) => t === '1');
    await dialog.locator('[data-testid=confirm-run]').click();
    await until('the release done', async () => dialog.locator('[data-testid=released]').textContent(), (t) => t === 'Released 1 parked event(s).');
    await dialog.locator('[data-testid=confirm-close]').click();
    await until('the key gone from the list', async () => row.count(), (n) => n === 0);
    expect(await parkedRows(unknownKey)).toBe(0);
  });

  it('the connector paused and resumed from the page', async () => {
    const connect = createConnectClient(config.connect);
    await page.goto(`${rw.url}#/overview`);
    await page.waitForSelector('[data-testid=connector-pause]');
    await page.click('[data-testid=connector-pause]');
    const dialog = page.locator('dialog[data-testid=confirm]');
    await expect(dialog.locator('.what').textContent()).resolves.toContain('retains WAL until it is resumed');
    await dialog.locator('[data-testid=confirm-run]').click();
    await until('pause requested', async () => dialog.locator('[data-testid=connector-result]').textContent(), (t) => t?.endsWith('pause requested') === true);
    await dialog.locator('[data-testid=confirm-close]').click();
    await until('the connector PAUSED', async () => (await connect.status(config.connector.name))?.connector.state === 'PAUSED');
    await until('the page shows it PAUSED', async () => page.locator('[data-testid=connector-state]').textContent(), (t) => t === 'PAUSED');
    await page.click('[data-testid=connector-resume]');
    await dialog.locator('[data-testid=confirm-run]').click();
    await until('resume requested', async () => dialog.locator('[data-testid=connector-result]').textContent(), (t) => t?.endsWith('resume requested') === true);
    await dialog.locator('[data-testid=confirm-close]').click();
    await until('the connector RUNNING', async () => (await connect.status(config.connector.name))?.connector.state === 'RUNNING');
  });

  it('the audit log holds who, what, when and the result of every action, and the page lists it', async () => {
    const entries = readFileSync(auditLog, 'utf8')
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    expect(entries.map((e) => `${e.what.action}:${e.phase}`)).toEqual([
      'replay:started',
      'replay:ok',
      'release:started',
      'release:ok',
      'connector-pause:started',
      'connector-pause:ok',
      'connector-resume:started',
      'connector-resume:ok',
    ]);
    for (const e of entries) {
      expect(e.who).toMatchObject({ operator: 'token', via: 'session' });
      expect(Date.parse(e.at)).toBeGreaterThan(Date.now() - 10 * 60_000);
    }
    expect(entries[0].what.request).toMatchObject({ aggregateType: 'order', key: poisonKey, id: poisonId });
    expect(entries[1].result).toMatchObject({ replayed: 1, consumer: `c-${prefix}` });
    expect(entries[3].result).toMatchObject({ released: [{ aggregateId: unknownKey, eventId: unknownId }] });
    await page.goto(`${rw.url}#/audit`);
    await until('the audit entries listed', async () => page.locator('[data-testid=audit-entry]').count(), (n) => n === 8);
    await shot('6-audit');
  });

  it('no config secret reaches the page or the API; the CSP is strict', async () => {
    const bearer = { authorization: `Bearer ${TOKEN}` };
    const texts: string[] = [];
    for (const path of ['api/session', 'api/overview', 'api/series', 'api/dead-letters?aggregateType=order&state=all', 'api/parked', 'api/audit', '', 'assets/console.js']) {
      texts.push((await raw(`${rw.url}${path}`, { headers: bearer })).body);
    }
    for (const view of ['overview', 'dead-letters?aggregateType=order&state=all', 'parked', 'audit']) {
      await page.goto(`${rw.url}#/${view}`);
      await page.waitForTimeout(1_500);
      texts.push(await page.content());
    }
    const all = texts.join('\n');
    for (const secret of [...Object.values(SECRETS), TOKEN]) expect(all).not.toContain(secret);
    const home = await raw(rw.url, {});
    const csp = String(home.headers['content-security-policy']);
    expect(csp).toMatch(/script-src 'self' 'sha256-[A-Za-z0-9+/=]+'/);
    expect(csp).toContain("require-trusted-types-for 'script'");
    expect(csp).not.toMatch(/unsafe-(inline|eval)/);
    expect(home.headers['x-frame-options']).toBe('DENY');
    expect(pageErrors).toEqual([]);
  });
});
