import { createHash } from 'node:crypto';
import { appendFileSync, chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from 'pg';
import { OutboxError } from 'outbox-router/errors';
import type { StackPaths } from './paths';
import { aptCommand, aptInstall } from './apt-install';
import { setTimeout as sleep } from 'node:timers/promises';
import { childPidsOf, isAlive, run, type RunResult } from './processes';
import { POSTGRES, REGISTRY_DATABASE, STACK_HOST, STACK_PORTS, STACK_VERSIONS } from './settings';
import { renderTemplateFile } from './template';

const INCLUDE_LINE = "include_if_exists = 'outbox-stack.conf'";

export interface PostgresInstall {
  binDir: string;
  major: number;
}

/** The newest PostgreSQL server Debian's packages installed under /usr/lib/postgresql. */
export function findPostgres(): PostgresInstall | undefined {
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const majors = readdirSync(base)
    .map((v) => Number.parseInt(v, 10))
    .filter((v) => Number.isInteger(v) && v >= STACK_VERSIONS.postgresMin && existsSync(join(base, String(v), 'bin', 'initdb')))
    .sort((a, b) => b - a);
  return majors[0] === undefined ? undefined : { binDir: join(base, String(majors[0]), 'bin'), major: majors[0] };
}

/** Installs Debian's PostgreSQL server when none is present (root only). */
export function ensurePostgresInstalled(): PostgresInstall {
  const found = findPostgres();
  if (found) return found;
  const fix = `Install it with \`${aptCommand(['postgresql'])}\` (Debian/Ubuntu), then rerun \`npm run stack:up\`.`;
  const outcome = aptInstall(['postgresql']);
  if (!outcome.ok && outcome.reason !== 'failed') {
    throw new OutboxError('STACK_POSTGRES_MISSING', `No PostgreSQL ${STACK_VERSIONS.postgresMin}+ server under /usr/lib/postgresql. ${fix}`);
  }
  const after = findPostgres();
  if (!outcome.ok || !after) {
    throw new OutboxError('STACK_POSTGRES_MISSING', `Installing PostgreSQL with apt-get failed. ${fix} apt-get said:\n${outcome.ok ? '(nothing)' : outcome.output}`);
  }
  return after;
}

const asRoot = (): boolean => process.getuid?.() === 0;

/** initdb and postgres refuse to run as root: as root we run them as the `postgres` OS user. */
export function runAsOwner(command: string, args: string[]): RunResult {
  return asRoot() ? run('runuser', ['-u', 'postgres', '--', command, ...args]) : run(command, args);
}

export function chownToPostgres(path: string): void {
  if (asRoot()) run('chown', ['-R', 'postgres:postgres', path]);
}

export interface PostgresLayout {
  root: string;
  dataDir: string;
  socketDir: string;
  logFile: string;
}

/**
 * Where the cluster lives. Normally `<state>/postgres`; when the `postgres` OS user cannot reach the
 * state folder (a checkout under a private home or a mode-700 temp folder), a per-checkout folder under
 * /var/lib/postgresql instead. The choice is remembered in the state folder so `down --clean` finds it.
 */
export function postgresLayout(paths: StackPaths, name = 'postgres'): PostgresLayout {
  const pointer = join(paths.stateDir, `${name}-root`);
  let root: string;
  if (existsSync(pointer)) {
    root = readFileSync(pointer, 'utf8').trim();
  } else {
    mkdirSync(paths.stateDir, { recursive: true });
    const reachable = !asRoot() || run('runuser', ['-u', 'postgres', '--', 'test', '-x', paths.stateDir]).status === 0;
    const hash = createHash('sha256').update(paths.stateDir).digest('hex').slice(0, 12);
    root = reachable ? join(paths.stateDir, name) : join('/var/lib/postgresql/outbox-router', name === 'postgres' ? hash : `${hash}-${name}`);
    writeFileSync(pointer, `${root}\n`);
  }
  return { root, dataDir: join(root, 'data'), socketDir: join(root, 'run'), logFile: join(root, 'postgres.log') };
}

/** A cluster's own settings: the stack's on 55432, or one of the version matrix's (postgres-versions.ts). */
export interface ClusterSettings {
  port: number;
  /** initdb --wal-segsize (MB); PostgreSQL's default is 16. */
  walSegmentMb?: number;
  /** Lines appended to the rendered settings. */
  extraConf?: string;
  /** The superuser's password; default the local stack's. */
  superuserPassword?: string;
}

export const STACK_CLUSTER: ClusterSettings = Object.freeze({ port: STACK_PORTS.postgres });

export function initPostgres(install: PostgresInstall, paths: StackPaths, layout: PostgresLayout, cluster: ClusterSettings = STACK_CLUSTER): boolean {
  let created = false;
  if (!existsSync(join(layout.dataDir, 'PG_VERSION'))) {
    rmSync(layout.dataDir, { recursive: true, force: true });
    mkdirSync(layout.socketDir, { recursive: true });
    const pwfile = join(layout.root, '.pwfile');
    writeFileSync(pwfile, `${cluster.superuserPassword ?? POSTGRES.password}\n`, { mode: 0o600 });
    chownToPostgres(layout.root);
    const result = runAsOwner(join(install.binDir, 'initdb'), [
      '-D', layout.dataDir, '-U', POSTGRES.user, `--pwfile=${pwfile}`, '-E', 'UTF8', '--locale=C',
      '--auth-local=trust', '--auth-host=scram-sha-256',
      // PostgreSQL 13's initdb has no --no-instructions (added in 14)
      ...(install.major >= 14 ? ['--no-instructions'] : []),
      ...(cluster.walSegmentMb ? [`--wal-segsize=${cluster.walSegmentMb}`] : []),
    ]);
    rmSync(pwfile, { force: true });
    if (result.status !== 0) {
      throw new OutboxError('STACK_SERVICE_FAILED', `initdb failed for ${layout.dataDir}. Remove the folder (\`npm run stack:down -- --clean\`) and retry; initdb said:\n${result.output.trim()}`, { details: { service: 'postgres' } });
    }
    appendFileSync(join(layout.dataDir, 'postgresql.conf'), `\n# outbox-router native stack\n${INCLUDE_LINE}\n`);
    created = true;
  }
  const conf = renderTemplateFile(join(paths.connectTemplates, 'postgresql.conf'), {
    host: STACK_HOST,
    postgresPort: cluster.port,
    socketDir: layout.socketDir,
    walLevel: POSTGRES.walLevel,
    maxReplicationSlots: POSTGRES.maxReplicationSlots,
    maxWalSenders: POSTGRES.maxWalSenders,
    maxConnections: POSTGRES.maxConnections,
  });
  writeFileSync(join(layout.dataDir, 'outbox-stack.conf'), cluster.extraConf ? `${conf}\n${cluster.extraConf}\n` : conf);
  mkdirSync(layout.socketDir, { recursive: true });
  chmodSync(layout.root, 0o755);
  chownToPostgres(layout.root);
  return created;
}

export function postgresPid(layout: PostgresLayout): number | undefined {
  const pidFile = join(layout.dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return undefined;
  const pid = Number.parseInt(readFileSync(pidFile, 'utf8').split('\n')[0] ?? '', 10);
  return Number.isInteger(pid) ? pid : undefined;
}

export function postgresRunning(install: PostgresInstall, layout: PostgresLayout): boolean {
  return existsSync(layout.dataDir) && runAsOwner(join(install.binDir, 'pg_ctl'), ['status', '-D', layout.dataDir]).status === 0;
}

export function startPostgres(install: PostgresInstall, layout: PostgresLayout): void {
  const result = runAsOwner(join(install.binDir, 'pg_ctl'), ['start', '-D', layout.dataDir, '-l', layout.logFile, '-w', '-t', '60']);
  if (result.status !== 0) {
    throw new OutboxError('STACK_SERVICE_FAILED', `PostgreSQL did not start: ${result.output.trim()}`, { details: { service: 'postgres', log: layout.logFile } });
  }
}

/**
 * SIGKILL of the postmaster, as in a crash: no shutdown checkpoint, the next start runs crash recovery.
 * Its backends exit by themselves once they see it gone (a busy one at its next check) and are waited
 * for, since a new postmaster refuses to start while they hold the shared memory; then the dead
 * postmaster is waited for until reaped, since `pg_ctl status` counts a zombie as running (reaping can
 * take seconds when the machine's init reaps orphans slowly). `onKilled` runs right after the signal,
 * `onExited` once every process has exited, before the reaping (a failover need not wait for that).
 * Returns false when it was not running.
 */
export async function killPostgres(layout: PostgresLayout, { onKilled = () => {}, onExited = () => {} }: { onKilled?: () => void; onExited?: () => void } = {}): Promise<boolean> {
  const pid = postgresPid(layout);
  if (pid === undefined || !isAlive(pid)) return false;
  const children = childPidsOf(pid);
  process.kill(pid, 'SIGKILL');
  onKilled();
  while (isAlive(pid)) await sleep(10);
  const deadline = Date.now() + 15_000;
  while (children.some(isAlive) && Date.now() < deadline) await sleep(10);
  for (const child of children.filter(isAlive)) {
    try {
      process.kill(child, 'SIGKILL');
    } catch {
      // it exited meanwhile
    }
  }
  while (children.some(isAlive)) await sleep(10);
  onExited();
  const reaped = Date.now() + 10_000;
  while (existsSync(`/proc/${pid}`) && Date.now() < reaped) await sleep(50);
  return true;
}

export function stopPostgres(install: PostgresInstall, layout: PostgresLayout): boolean {
  if (!postgresRunning(install, layout)) return false;
  const result = runAsOwner(join(install.binDir, 'pg_ctl'), ['stop', '-D', layout.dataDir, '-m', 'fast', '-w', '-t', '60']);
  if (result.status !== 0) {
    throw new OutboxError('STACK_SERVICE_FAILED', `PostgreSQL did not stop: ${result.output.trim()}`, { details: { service: 'postgres', log: layout.logFile } });
  }
  return true;
}

export function adminClient(database = 'postgres', port: number = STACK_PORTS.postgres): Client {
  return new Client({
    host: STACK_HOST,
    port,
    user: POSTGRES.user,
    password: POSTGRES.password,
    database,
    connectionTimeoutMillis: 2_000,
  });
}

/** Creates the `app` database and the registry's once; safe to call on every `up`. `client` connects as the superuser (default: the plain stack's). */
export async function ensureAppDatabase(port: number = STACK_PORTS.postgres, client: Client = adminClient('postgres', port)): Promise<void> {
  await client.connect();
  try {
    for (const name of [POSTGRES.database, REGISTRY_DATABASE]) {
      const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      if (rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
    }
  } finally {
    await client.end();
  }
}
