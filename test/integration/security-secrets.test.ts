/**
 * Secrets never leak: every CLI command that can run against the local stack runs as a child process
 * (`node dist/cli/main.js`, what users run) at `--log-level debug --log-format json`, with distinctive
 * secrets in the environment: the three role passwords, registry and Connect basic-auth passwords,
 * Kafka SASL and TLS key passwords. Nothing they print (stdout and stderr) may contain a secret, in
 * clear or as the base64 of a basic-auth header; the connector config stored in Connect holds only
 * the config-provider reference. The local Connect and registry have no auth and ignore the basic-auth
 * header they are sent; the Connect worker reads the CDC password through its file config provider.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { createConnectClient } from '../../src/connector';
import { PROJECT_ROOT } from '../../scripts/stack/paths';
import { orderCreatedJson, tempSchemas } from '../unit/codec/temp-schemas';
import { freshDatabase, pgConfig, randomIdentifier, stackUrls, testKafka, withClient, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(600_000);

const CLI = join(PROJECT_ROOT, 'dist', 'cli', 'main.js');
const tag = randomBytes(6).toString('hex');
const id = randomIdentifier('sec').slice(-12);
const USERS = { registry: `reg-user-${tag}`, connect: `connect-user-${tag}`, kafka: `kafka-user-${tag}` };
const SECRETS = {
  cdc: `CdcS3cret${tag}`,
  app: `AppS3cret${tag}`,
  monitor: `MonS3cret${tag}`,
  router: `RtrS3cret${tag}`,
  relay: `RlyS3cret${tag}`,
  registry: `RegS3cret${tag}`,
  connect: `ConnS3cret${tag}`,
  kafkaSasl: `SaslS3cret${tag}`,
  kafkaKey: `KeyS3cret${tag}`,
  wrongPg: `PgWr0ng${tag}`,
};
const ROLES = { cdc: `cdc_${id}`, app: `app_${id}`, monitor: `mon_${id}`, router: `rtr_${id}`, relay: `rly_${id}` };
const CONNECTOR = `sec-secrets-${id}`;
const SLOT = `sec_secrets_${id}`;
const TOPIC_BASE = `sec-${id}`;

/** Every form a secret could be printed in: clear text and inside a basic-auth header. */
const FORMS: Array<[string, string]> = [
  ...Object.entries(SECRETS).map(([k, v]): [string, string] => [k, v]),
  ['registry basic auth', Buffer.from(`${USERS.registry}:${SECRETS.registry}`).toString('base64')],
  ['connect basic auth', Buffer.from(`${USERS.connect}:${SECRETS.connect}`).toString('base64')],
];

interface Run {
  args: string[];
  code: number | null;
  stdout: string;
  stderr: string;
}

let db: FreshDatabase;
let dir: string;
let configFile: string;
let schemasDir: string;
const runs: Run[] = [];

function baseEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // Nothing from the test runner's own environment may decide which database or roles are used.
  for (const key of Object.keys(env)) if (key.startsWith('OUTBOX_') || key.startsWith('PG') || key === 'LOG_LEVEL' || key === 'LOG_FORMAT') delete env[key];
  return {
    ...env,
    OUTBOX_CDC_PASSWORD: SECRETS.cdc,
    OUTBOX_APP_PASSWORD: SECRETS.app,
    OUTBOX_MONITOR_PASSWORD: SECRETS.monitor,
    OUTBOX_ROUTER_PASSWORD: SECRETS.router,
    OUTBOX_RELAY_PASSWORD: SECRETS.relay,
    OUTBOX_REGISTRY_USERNAME: USERS.registry,
    OUTBOX_REGISTRY_PASSWORD: SECRETS.registry,
    OUTBOX_CONNECT_USERNAME: USERS.connect,
    OUTBOX_CONNECT_PASSWORD: SECRETS.connect,
    OUTBOX_KAFKA_SASL_MECHANISM: 'scram-sha-512',
    OUTBOX_KAFKA_SASL_USERNAME: USERS.kafka,
    OUTBOX_KAFKA_SASL_PASSWORD: SECRETS.kafkaSasl,
    OUTBOX_KAFKA_SSL_KEY_PASSWORD: SECRETS.kafkaKey,
  };
}

/** Runs `outbox --log-level debug --log-format json <args>` and records what it printed. */
function cli(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 180_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, '--log-level', 'debug', '--log-format', 'json', ...args], {
      cwd: PROJECT_ROOT,
      env: { ...baseEnv(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      const run = { args, code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
      runs.push(run);
      resolve(run);
    });
  });
}

function leaks(run: Run): string[] {
  const text = `${run.stdout}\n${run.stderr}`;
  return FORMS.filter(([, form]) => text.includes(form)).map(([name]) => `${name} in the output of \`outbox ${run.args.join(' ')}\``);
}

function expectClean(run: Run): void {
  expect(leaks(run)).toEqual([]);
}

const base = (...args: string[]) => [...args, '--config', configFile];

/** A stand-in HTTP endpoint that records the headers it is sent (to prove basic auth goes out). */
async function recordingServer(status: number, body: unknown): Promise<{ server: Server; url: string; headers: IncomingHttpHeaders[] }> {
  const headers: IncomingHttpHeaders[] = [];
  const server = createServer((req, res) => {
    headers.push(req.headers);
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, headers };
}

beforeAll(async () => {
  // The CLI under test is the built one: compile the current sources (tsc emits even if unrelated files have type errors).
  await new Promise<void>((resolve) => {
    const build = spawn('npm', ['run', '-s', 'build'], { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    build.stdout.on('data', (b: Buffer) => (text += b.toString()));
    build.stderr.on('data', (b: Buffer) => (text += b.toString()));
    build.on('close', (code) => {
      if (code !== 0) process.stderr.write(`[security-secrets] npm run build exited ${code} (testing what it emitted):\n${text.slice(0, 2000)}\n`);
      resolve();
    });
  });
  expect(existsSync(CLI)).toBe(true);

  db = await freshDatabase('sec_secrets');
  dir = mkdtempSync(join(tmpdir(), 'outbox-sec-'));
  // The Connect worker resolves ${file:...:password} itself: the secret stays out of the stored config.
  const secretFile = join(dir, 'cdc.properties');
  writeFileSync(secretFile, `password=${SECRETS.cdc}\n`, { mode: 0o600 });
  configFile = join(dir, 'outbox.yaml');
  writeFileSync(
    configFile,
    [
      `database: { database: ${db.name} }`,
      `roles: { cdc: ${ROLES.cdc}, app: ${ROLES.app}, monitor: ${ROLES.monitor}, router: ${ROLES.router}, relay: ${ROLES.relay} }`,
      'connector:',
      `  name: ${CONNECTOR}`,
      `  slotName: ${SLOT}`,
      `  topicPrefix: ${TOPIC_BASE}`,
      `  topicReplacement: "${TOPIC_BASE}.event.\${routedByValue}"`,
      `  passwordRef: "\${file:${secretFile}:password}"`,
      '  heartbeatIntervalMs: 1000',
      '',
    ].join('\n'),
  );
  schemasDir = tempSchemas({ 'order/OrderCreated': orderCreatedJson() });
});

afterAll(async () => {
  const connect = createConnectClient({ url: stackUrls.connect, requestTimeoutMs: 10_000 });
  if (await connect.getConfig(CONNECTOR).catch(() => undefined)) await cli(base('connector:delete', '--drop-slot'));
  await db?.drop();
  await withClient('postgres', async (c) => {
    await c.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active', [SLOT]).catch(() => {});
    for (const role of Object.values(ROLES)) await c.query(`DROP ROLE IF EXISTS ${c.escapeIdentifier(role)}`).catch(() => {});
  });
  const admin = testKafka().admin();
  await admin.connect();
  const topics = (await admin.listTopics()).filter((t) => t.includes(id));
  if (topics.length) await admin.deleteTopics({ topics }).catch(() => {});
  await admin.disconnect();
});

describe('secrets never reach output or Connect', () => {
  it('db:provision sets every role password from the environment without printing any', async () => {
    const first = await cli(base('db:provision', '--json'));
    expect(first.code).toBe(0);
    expect(JSON.parse(first.stdout).passwordsSet.sort()).toEqual(Object.values(ROLES).sort());
    expect(first.stderr).toContain('"msg":"provision: applied'); // the debug-level JSON log was captured
    expectClean(first);
    const again = await cli(base('db:provision'));
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('passwords: unchanged');
    expectClean(again);
    // The passwords took effect: each role logs in with its secret.
    for (const role of ['cdc', 'app', 'monitor', 'router', 'relay'] as const) {
      const client = new Client({ ...pgConfig(db.name), user: ROLES[role], password: SECRETS[role] });
      await client.connect();
      await client.end();
    }
  });

  it('schemas:register and schemas:check, with registry credentials', async () => {
    const register = await cli(base('schemas:register', '--schemas', schemasDir));
    expect(register.code).toBe(0);
    expect(register.stdout).toContain(`${TOPIC_BASE}.event.order`);
    expectClean(register);
    const check = await cli(base('schemas:check', '--schemas', schemasDir, '--json'));
    expect(check.code).toBe(0);
    expect(JSON.parse(check.stdout).ok).toBe(true);
    expectClean(check);
  });

  it('connector:deploy (dry run, create, unchanged) stores only the ${file:…} reference in Connect', async () => {
    const dry = await cli(base('connector:deploy', '--dry-run', '--json'));
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.stdout).action).toBe('dry-run');
    expectClean(dry);

    const deploy = await cli(base('connector:deploy', '--json'));
    expect(deploy.code).toBe(0);
    expect(JSON.parse(deploy.stdout)).toMatchObject({ action: 'created', status: { tasks: [{ state: 'RUNNING' }] } });
    expectClean(deploy);

    const stored = await createConnectClient({ url: stackUrls.connect, requestTimeoutMs: 10_000 }).getConfig(CONNECTOR);
    expect(stored?.['database.password']).toBe(`\${file:${join(dir, 'cdc.properties')}:password}`);
    const storedText = JSON.stringify(stored);
    for (const [name, form] of FORMS) expect({ name, stored: storedText.includes(form) }).toEqual({ name, stored: false });
    // Connect's own API does not resolve it either.
    const raw = await fetch(`${stackUrls.connect}/connectors/${CONNECTOR}`).then((r) => r.text());
    expect(raw).not.toContain(SECRETS.cdc);

    const unchanged = await cli(base('connector:deploy'));
    expect(unchanged.code).toBe(0);
    expect(unchanged.stdout).toContain('unchanged');
    expectClean(unchanged);
  });

  it('connector:status, pause, resume, restart', async () => {
    const status = await cli(base('connector:status', '--json'));
    expect(JSON.parse(status.stdout)).toMatchObject({ connector: CONNECTOR, exists: true, state: 'RUNNING' });
    expectClean(status);
    for (const command of ['connector:pause', 'connector:resume', 'connector:restart']) {
      const run = await cli(base(command));
      expect({ command, code: run.code }).toEqual({ command, code: 0 });
      expectClean(run);
    }
  });

  it('status and watchdog --once (they read the same configuration; the Kafka SASL settings cannot succeed on the plain-text broker)', async () => {
    for (const args of [base('status', '--json'), base('watchdog', '--once')]) {
      const run = await cli(args, {}, 120_000);
      expect(run.stdout.length + run.stderr.length).toBeGreaterThan(0);
      expectClean(run);
    }
  });

  it('connector:delete --drop-slot', async () => {
    const run = await cli(base('connector:delete', '--drop-slot', '--json'));
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ deleted: true, slotDropped: true });
    expectClean(run);
  });

  it('stack status, and --help of every command and subcommand', async () => {
    const stack = await cli(['stack', 'status', '--json']);
    expect(JSON.parse(stack.stdout).services.length).toBeGreaterThan(0);
    expectClean(stack);

    const top = await cli(['--help']);
    expect(top.code).toBe(0);
    const commands = [...top.stdout.matchAll(/^ {2}([a-z][a-z:-]*)\b/gm)].map((m) => m[1] as string).filter((c) => c !== 'help');
    expect(commands).toEqual(expect.arrayContaining(['db:provision', 'connector:deploy', 'router', 'bench', 'stack', 'watchdog', 'relay']));
    const stackHelp = await cli(['stack', '--help']);
    const subcommands = [...stackHelp.stdout.matchAll(/^ {2}([a-z]+)\b/gm)].map((m) => `stack ${m[1]}`).filter((c) => c !== 'stack help');
    expect(subcommands).toEqual(expect.arrayContaining(['stack up', 'stack down', 'stack status']));
    for (const command of [...commands, ...subcommands]) {
      const run = await cli([...command.split(' '), '--help']);
      expect({ command, code: run.code }).toEqual({ command, code: 0 });
      expect(run.stdout).toContain('Usage:');
      expectClean(run);
    }
  });
});

describe('secrets stay out of error messages', () => {
  it('a wrong database password is named as the problem, not printed', async () => {
    const run = await cli(base('db:provision'), { PGPASSWORD: SECRETS.wrongPg });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('DB_AUTH_FAILED');
    expect(run.stderr).not.toContain(SECRETS.wrongPg);
    expectClean(run);
  });

  it('credentials inside OUTBOX_CONNECT_URL / OUTBOX_REGISTRY_URL are stripped from messages and JSON', async () => {
    const inUrl = (url: string, user: string, password: string) => url.replace('://', `://${user}:${password}@`);
    const env = { OUTBOX_CONNECT_URL: inUrl(stackUrls.connect, USERS.connect, SECRETS.connect), OUTBOX_CONNECT_USERNAME: '', OUTBOX_CONNECT_PASSWORD: '' };
    const status = await cli(base('connector:status', '--json'), env);
    expect(JSON.parse(status.stdout).url).toBe(stackUrls.connect);
    expectClean(status);

    const unreachable = await cli(base('connector:status'), { ...env, OUTBOX_CONNECT_URL: inUrl('http://127.0.0.1:1', USERS.connect, SECRETS.connect) });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain('CONNECT_UNREACHABLE');
    expect(unreachable.stderr).toContain('http://127.0.0.1:1');
    expectClean(unreachable);

    const registry = await cli(base('schemas:check', '--schemas', schemasDir), {
      OUTBOX_REGISTRY_URL: inUrl('http://127.0.0.1:1/apis/ccompat/v7', USERS.registry, SECRETS.registry),
      OUTBOX_REGISTRY_USERNAME: '',
      OUTBOX_REGISTRY_PASSWORD: '',
    });
    expect(registry.code).toBe(1);
    expect(registry.stderr).toContain('REGISTRY_UNAVAILABLE');
    expectClean(registry);
  });

  it('an invalid URL holding credentials is reported without echoing them', async () => {
    const run = await cli(base('connector:status'), { OUTBOX_CONNECT_URL: `http://${USERS.connect}:${SECRETS.connect}@127.0.0.1:99999999` });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('CONFIG_INVALID');
    expect(run.stderr).toContain('connect.url (from OUTBOX_CONNECT_URL)');
    expectClean(run);
  });

  it('basic auth is really sent to Connect and the registry (to a recording stand-in), and their refusals print no secret', async () => {
    const connect = await recordingServer(401, { error_code: 401, message: 'Unauthorized' });
    const registry = await recordingServer(401, { error_code: 401, message: 'Unauthorized' });
    try {
      const status = await cli(base('connector:status'), { OUTBOX_CONNECT_URL: connect.url });
      expect(status.code).toBe(1);
      expect(status.stderr).toContain('CONNECT_AUTH_FAILED');
      expectClean(status);
      expect(connect.headers[0]?.authorization).toBe(`Basic ${Buffer.from(`${USERS.connect}:${SECRETS.connect}`).toString('base64')}`);

      const check = await cli(base('schemas:check', '--schemas', schemasDir), { OUTBOX_REGISTRY_URL: registry.url });
      expect(check.code).toBe(1);
      expectClean(check);
      expect(registry.headers.length).toBeGreaterThan(0);
      for (const h of registry.headers) expect(h.authorization).toBe(`Basic ${Buffer.from(`${USERS.registry}:${SECRETS.registry}`).toString('base64')}`);
    } finally {
      connect.server.close();
      registry.server.close();
    }
  });

  it('ran every command above (a summary of what was checked)', () => {
    process.stderr.write(`[security-secrets] ${runs.length} CLI runs checked for ${FORMS.length} secret forms\n`);
    expect(runs.length).toBeGreaterThan(30);
    expect(runs.flatMap(leaks)).toEqual([]);
  });
});
