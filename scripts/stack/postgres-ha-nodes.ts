/**
 * The building blocks of the PostgreSQL pair (postgres-ha.ts): where each node lives, starting and
 * seeding nodes, giving a node its role, waiting for replication, and the proxy in front of them.
 */
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from 'pg';
import { OutboxError } from 'outbox-router/errors';
import type { StackPaths } from './paths';
import { PROJECT_ROOT } from './paths';
import * as pg from './postgres';
import {
  alterSystemStatements, formatProxyTarget, HA_PORTS, HA_POSTGRES_VERSION, PAIR_CONF, parseProxyTarget, passfileLine, peerOf,
  renderAutoConf, roleSettings, standbyName, validatePorts, type HaPorts, type HaRole, type NodeName,
} from './postgres-ha-config';
import { ensurePostgresJar, unpackServer } from './postgres-versions';
import { isAlive, ownedPid, portInUse, run, spawnDetached, stopProcess } from './processes';
import { STACK_HOST } from './settings';

export interface HaStep {
  step: string;
  ms: number;
  detail: string;
}

export interface HaOptions {
  /** Other ports than the cluster profile's (tests). */
  ports?: Partial<HaPorts>;
  /**
   * How long rebuildStandby waits for the standby's synchronized, persistent copy of each failover slot
   * (default 120 s). A synced slot stays temporary until its consumer advances it on the primary past the
   * standby's oldest WAL, so with no consumer running (a test that decodes by hand) it may never persist:
   * the wait then gives up and the report names the slots (slotsNotSynced).
   */
  slotSyncWaitMs?: number;
}

export interface HaContext {
  paths: StackPaths;
  ports: HaPorts;
  /** Server binaries, shared by both nodes. */
  install: pg.PostgresInstall;
  layouts: Record<NodeName, pg.PostgresLayout>;
  /** The folder holding both nodes, the server and the passfile (reachable by the `postgres` OS user). */
  root: string;
  passfile: string;
  targetFile: string;
  proxyPidFile: string;
  proxyLogFile: string;
}

export const PROXY_SCRIPT = join(PROJECT_ROOT, 'build', 'scripts', 'stack', 'pg-proxy.js');

/** Where the pair lives: <state>/postgres-ha/{a,b} (or under /var/lib/postgresql, see postgresLayout). No downloads. */
export function haContext(paths: StackPaths, options: HaOptions = {}): HaContext {
  const ports = validatePorts({ ...HA_PORTS, ...options.ports });
  mkdirSync(join(paths.stateDir, 'postgres-ha'), { recursive: true });
  const layouts = { a: pg.postgresLayout(paths, 'postgres-ha/a'), b: pg.postgresLayout(paths, 'postgres-ha/b') };
  const root = dirname(layouts.a.root);
  return {
    paths,
    ports,
    install: { binDir: join(root, 'server', 'bin'), major: 17 },
    layouts,
    root,
    passfile: join(root, '.pgpass'),
    targetFile: join(paths.stateDir, 'postgres-ha', 'proxy-target'),
    proxyPidFile: join(paths.pidDir, 'pg-proxy.pid'),
    proxyLogFile: join(paths.logDir, 'pg-proxy.log'),
  };
}

/** Downloads (once, into the jar cache) and unpacks (once) the PostgreSQL 17 server; writes the passfile. */
export function ensureServer(ctx: HaContext): void {
  mkdirSync(ctx.root, { recursive: true });
  unpackServer(ensurePostgresJar(ctx.paths, HA_POSTGRES_VERSION), dirname(ctx.install.binDir));
  // libpq ignores a passfile others can read; the `postgres` OS user (who runs pg_basebackup, pg_rewind
  // and the walreceiver) must own it.
  writeFileSync(ctx.passfile, passfileLine(), { mode: 0o600 });
  pg.chownToPostgres(ctx.root);
}

export const nodePort = (ctx: HaContext, name: NodeName): number => ctx.ports[name];
export const nodeRunning = (ctx: HaContext, name: NodeName): boolean => existsSync(join(ctx.install.binDir, 'pg_ctl')) && pg.postgresRunning(ctx.install, ctx.layouts[name]);
export const hasData = (ctx: HaContext, name: NodeName): boolean => existsSync(join(ctx.layouts[name].dataDir, 'PG_VERSION'));
/** The role a node's data folder gives it at start: standby.signal makes a standby. */
export const diskRole = (ctx: HaContext, name: NodeName): HaRole => (existsSync(join(ctx.layouts[name].dataDir, 'standby.signal')) ? 'standby' : 'primary');

/** The stack's settings plus the pair's, on the node's port. Creates the cluster when the folder is empty. */
export function renderNodeConf(ctx: HaContext, name: NodeName): boolean {
  return pg.initPostgres(ctx.install, ctx.paths, ctx.layouts[name], { port: nodePort(ctx, name), extraConf: PAIR_CONF });
}

/** Gives a stopped node its role: postgresql.auto.conf (as ALTER SYSTEM writes it) and standby.signal. */
export function writeRole(ctx: HaContext, name: NodeName, role: HaRole, withStandby = false): void {
  const { dataDir, root } = ctx.layouts[name];
  const settings = roleSettings(role, name, { peerPort: nodePort(ctx, peerOf(name)), passfile: ctx.passfile, withStandby });
  writeFileSync(join(dataDir, 'postgresql.auto.conf'), renderAutoConf(settings), { mode: 0o600 });
  if (role === 'standby') writeFileSync(join(dataDir, 'standby.signal'), '');
  else rmSync(join(dataDir, 'standby.signal'), { force: true });
  pg.chownToPostgres(root);
}

/** Gives a running node its role settings (a promoted standby, or a primary that gains or loses its standby). */
export async function alterRole(ctx: HaContext, name: NodeName, role: HaRole, withStandby: boolean): Promise<void> {
  const settings = roleSettings(role, name, { peerPort: nodePort(ctx, peerOf(name)), passfile: ctx.passfile, withStandby });
  await withNode(ctx, name, async (client) => {
    for (const statement of alterSystemStatements(settings)) await client.query(statement);
  });
}

export async function withNode<T>(ctx: HaContext, name: NodeName, work: (client: Client) => Promise<T>, database = 'postgres'): Promise<T> {
  const client = pg.adminClient(database, nodePort(ctx, name));
  client.on('error', () => {});
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => {});
  }
}

export async function startNode(ctx: HaContext, name: NodeName): Promise<void> {
  const port = nodePort(ctx, name);
  if (await portInUse(port, STACK_HOST)) {
    throw new OutboxError('STACK_PORT_IN_USE', `Port ${port} (PostgreSQL node ${name}) is held by another process. Find it with \`ss -ltnp 'sport = :${port}'\` and stop it, or give the pair other ports.`, { details: { port } });
  }
  renderNodeConf(ctx, name);
  pg.startPostgres(ctx.install, ctx.layouts[name]);
}

/** A physical slot for the standby `standby`, kept from creation (reserves WAL at once). */
export async function ensurePhysicalSlot(ctx: HaContext, primary: NodeName, standby: NodeName): Promise<void> {
  await withNode(ctx, primary, async (client) => {
    const slot = standbyName(standby);
    const { rowCount } = await client.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [slot]);
    if (rowCount === 0) await client.query('SELECT pg_create_physical_replication_slot($1, true)', [slot]);
  });
}

/**
 * A fresh copy of the primary's data as `standby`'s folder, by PostgreSQL's own backup API:
 * pg_backup_start, a file copy, pg_backup_stop, its label as backup_label. Not pg_basebackup: zonky's
 * builds ship only initdb, pg_ctl and postgres, and Debian 12's client tools are PostgreSQL 15's, which
 * refuse a newer server. The copy holds the backup's own WAL (copyBackupWal); the standby streams the rest
 * through its physical slot, made (reserving WAL) before the backup starts.
 */
export async function baseBackup(ctx: HaContext, primary: NodeName, standby: NodeName): Promise<void> {
  const source = ctx.layouts[primary].dataDir;
  const target = ctx.layouts[standby];
  // Deleting the old folder (its WAL segments) takes seconds on a slow disk: moved aside, removed while the copy runs.
  const old = `${target.dataDir}.old`;
  rmSync(old, { recursive: true, force: true });
  if (existsSync(target.dataDir)) renameSync(target.dataDir, old);
  const removed = rm(old, { recursive: true, force: true });
  mkdirSync(target.dataDir, { recursive: true, mode: 0o700 });
  await withNode(ctx, primary, async (client) => {
    const started = await client.query<{ wal: string }>('SELECT pg_walfile_name(pg_backup_start($1, true)) AS wal', [`${standbyName(standby)} ${new Date().toISOString()}`]);
    // GNU tar exits 1 when a file changed while read: expected here, the WAL replay repairs it (full-page writes).
    const copy = run('sh', ['-c', `tar -C "$1" -cf - ${COPY_EXCLUDES.map((e) => `'--exclude=${e}'`).join(' ')} --warning=no-file-changed --warning=no-file-removed --ignore-failed-read . | tar -C "$2" -xf -`, 'copy', source, target.dataDir]);
    const { rows } = await client.query<{ labelfile: string; spcmapfile: string | null; wal: string }>('SELECT labelfile, spcmapfile, pg_walfile_name(lsn) AS wal FROM pg_backup_stop(false)');
    copyBackupWal(source, target.dataDir, started.rows[0]?.wal ?? '', rows[0]?.wal ?? '');
    if (copy.status > 1) {
      throw new OutboxError('STACK_SERVICE_FAILED', `Copying node ${primary}'s data to node ${standby} failed (disk full?): ${copy.output.trim()}`, { details: { service: 'postgres' } });
    }
    writeFileSync(join(target.dataDir, 'backup_label'), rows[0]?.labelfile ?? '');
    if (rows[0]?.spcmapfile) writeFileSync(join(target.dataDir, 'tablespace_map'), rows[0].spcmapfile);
  });
  for (const dir of ['pg_wal/archive_status', 'pg_replslot', 'pg_stat_tmp', 'pg_dynshmem', 'pg_notify', 'pg_serial', 'pg_snapshots', 'pg_subtrans']) {
    mkdirSync(join(target.dataDir, dir), { recursive: true, mode: 0o700 });
  }
  pg.chownToPostgres(target.root);
  await removed;
}

/**
 * The WAL segments from the backup's start to its end, and the timeline histories, as `pg_basebackup -X
 * fetch` includes them: without them the new standby reads its first checkpoint through the walreceiver,
 * which it starts only after seconds of waiting. A segment still being written is fine: recovery stops
 * at its last valid record and streams the rest through the slot.
 */
function copyBackupWal(source: string, target: string, first: string, last: string): void {
  const wanted = (f: string): boolean => f.endsWith('.history') || (/^[0-9A-F]{24}$/.test(f) && f >= first && f <= last);
  for (const file of readdirSync(join(source, 'pg_wal')).filter(wanted)) copyFileSync(join(source, 'pg_wal', file), join(target, 'pg_wal', file));
}

/** What pg_basebackup leaves out too: the server's run-time files, the WAL (streamed), slots (per server). */
const COPY_EXCLUDES = [
  './postmaster.pid', './postmaster.opts', './standby.signal', './backup_label', './backup_label.old', './tablespace_map',
  './pg_wal/*', './pg_replslot/*', './pg_stat_tmp/*', './pg_dynshmem/*', './pg_notify/*', './pg_serial/*', './pg_snapshots/*', './pg_subtrans/*', 'pgsql_tmp*',
];

export interface Replication {
  state: string;
  syncState: string;
  replayLsn: string | null;
  lagBytes: number | null;
}

/** The standby's row in the primary's pg_stat_replication, if connected. */
export async function replicationOf(ctx: HaContext, primary: NodeName, standby: NodeName): Promise<Replication | undefined> {
  return withNode(ctx, primary, async (client) => {
    const { rows } = await client.query<{ state: string; sync_state: string; replay_lsn: string | null; lag: string | null }>(
      'SELECT state, sync_state, replay_lsn::text, pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint::text AS lag FROM pg_stat_replication WHERE application_name = $1',
      [standbyName(standby)],
    );
    const row = rows[0];
    return row && { state: row.state, syncState: row.sync_state, replayLsn: row.replay_lsn, lagBytes: row.lag === null ? null : Number(row.lag) };
  });
}

/** Waits until `standby` streams from `primary` (and, with `sync`, counts as its synchronous standby). */
export async function waitStreaming(ctx: HaContext, primary: NodeName, standby: NodeName, sync: boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: Replication | undefined;
  while (Date.now() < deadline) {
    last = await replicationOf(ctx, primary, standby).catch(() => undefined);
    if (last?.state === 'streaming' && (!sync || last.syncState === 'sync')) return;
    await sleep(100);
  }
  throw new OutboxError('STACK_NOT_READY', `Node ${standby} did not ${sync ? 'become the synchronous standby' : 'stream'} of node ${primary} within ${timeoutMs / 1000} s (pg_stat_replication: ${last ? `${last.state}/${last.syncState}` : 'not connected'}). Read ${ctx.layouts[standby].logFile}.`, { retriable: true, details: { service: 'postgres', log: ctx.layouts[standby].logFile } });
}

/** The node the proxy forwards to (node a before the first start). */
export function currentPrimary(ctx: HaContext): NodeName {
  if (!existsSync(ctx.targetFile)) return 'a';
  const target = parseProxyTarget(readFileSync(ctx.targetFile, 'utf8'), ctx.targetFile);
  return target.port === ctx.ports.b ? 'b' : 'a';
}

export const proxyPid = (ctx: HaContext): number | undefined => ownedPid(ctx.proxyPidFile, ctx.targetFile);

/** Starts the proxy on the stable address, forwarding to `primary`; a running one is switched instead. */
export async function startProxy(ctx: HaContext, primary: NodeName): Promise<void> {
  if (proxyPid(ctx) !== undefined) {
    await switchProxy(ctx, primary);
    return;
  }
  if (!existsSync(PROXY_SCRIPT)) {
    throw new OutboxError('STACK_SERVICE_FAILED', `The PostgreSQL proxy ${PROXY_SCRIPT} is not built. Run \`npm run -s build\`, then retry.`, { details: { service: 'pg-proxy' } });
  }
  if (await portInUse(ctx.ports.proxy, STACK_HOST)) {
    throw new OutboxError('STACK_PORT_IN_USE', `Port ${ctx.ports.proxy} (the PostgreSQL proxy, the pair's stable address) is held by another process, perhaps the single-node stack's PostgreSQL. Find it with \`ss -ltnp 'sport = :${ctx.ports.proxy}'\` and stop it (\`npm run stack:down\`).`, { details: { port: ctx.ports.proxy } });
  }
  writeTarget(ctx, primary);
  rmSync(`${ctx.targetFile}.applied`, { force: true });
  const pid = spawnDetached({
    command: process.execPath,
    args: [PROXY_SCRIPT, '--listen', `${STACK_HOST}:${ctx.ports.proxy}`, '--target-file', ctx.targetFile],
    logFile: ctx.proxyLogFile,
    pidFile: ctx.proxyPidFile,
  });
  const deadline = Date.now() + 10_000;
  while (!(await portInUse(ctx.ports.proxy, STACK_HOST))) {
    // Whether the child lives, not proxyPid(): until it has exec'd node, its command line is still the
    // parent's, without the marker, and a busy machine showed that window (the proxy "did not start").
    if (Date.now() > deadline || !isAlive(pid)) {
      throw new OutboxError('STACK_SERVICE_FAILED', `The PostgreSQL proxy did not start listening on ${ctx.ports.proxy}. Read ${ctx.proxyLogFile}.`, { details: { service: 'pg-proxy', log: ctx.proxyLogFile } });
    }
    await sleep(50);
  }
}

function writeTarget(ctx: HaContext, primary: NodeName): string {
  const line = formatProxyTarget({ host: STACK_HOST, port: nodePort(ctx, primary) });
  mkdirSync(dirname(ctx.targetFile), { recursive: true });
  writeFileSync(`${ctx.targetFile}.tmp`, line);
  renameSync(`${ctx.targetFile}.tmp`, ctx.targetFile);
  return line;
}

/**
 * Points the stable address at `primary`: writes the target file, sends SIGHUP, and waits until the
 * proxy applied it (it then has closed every connection to the old target). Without a running proxy,
 * only the file changes (the next start reads it).
 */
export async function switchProxy(ctx: HaContext, primary: NodeName): Promise<void> {
  const applied = `${ctx.targetFile}.applied`;
  rmSync(applied, { force: true });
  const line = writeTarget(ctx, primary);
  const pid = proxyPid(ctx);
  if (pid === undefined) return;
  process.kill(pid, 'SIGHUP');
  const deadline = Date.now() + 10_000;
  while (!(existsSync(applied) && readFileSync(applied, 'utf8') === line)) {
    if (Date.now() > deadline) throw new OutboxError('STACK_SERVICE_FAILED', `The PostgreSQL proxy (pid ${pid}) did not apply its new target ${line.trim()} within 10 s. Read ${ctx.proxyLogFile}.`, { details: { service: 'pg-proxy', log: ctx.proxyLogFile } });
    await sleep(10);
  }
}

export async function stopProxy(ctx: HaContext): Promise<boolean> {
  const pid = proxyPid(ctx);
  if (pid === undefined) return false;
  await stopProcess(pid, 5_000);
  rmSync(ctx.proxyPidFile, { force: true });
  return true;
}

/**
 * Waits until the standby holds a synchronized, persistent copy of every failover logical slot of the
 * primary (`sync_replication_slots`): streaming alone does not say so, and a standby promoted before
 * then comes up with no slot, which Debezium's stored offset then cannot resume from. Returns the slots
 * still missing after `timeoutMs` (none when the pair is ready to fail over).
 */
export async function waitSlotsSynced(ctx: HaContext, primary: NodeName, standby: NodeName, timeoutMs = 120_000, only?: readonly string[]): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  let missing: string[] = [];
  for (;;) {
    const wanted = await withNode(ctx, primary, (c) => c.query<{ slot_name: string }>("SELECT slot_name FROM pg_replication_slots WHERE slot_type = 'logical' AND failover"));
    const have = await withNode(ctx, standby, (c) => c.query<{ slot_name: string }>('SELECT slot_name FROM pg_replication_slots WHERE synced AND NOT temporary'));
    const synced = new Set(have.rows.map((r) => r.slot_name));
    missing = wanted.rows.map((r) => r.slot_name).filter((s) => !synced.has(s) && (!only || only.includes(s)));
    if (missing.length === 0 || Date.now() > deadline) return missing;
    await sleep(250);
  }
}
