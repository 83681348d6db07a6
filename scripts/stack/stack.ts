import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { OutboxError } from 'outbox-router/errors';
import { resolveStackConfig, type StackConfig, type StackOptions } from './config';
import { findJava, type JavaRuntime } from './java';
import { stackPaths, type StackPaths } from './paths';
import * as pg from './postgres';
import { POSTGRES_MATRIX, stopMatrixCluster } from './postgres-versions';
import { describeFailure, probePostgres, type Probe } from './probes';
import { childPidsOf, isAlive, portInUse, removeFile, stopProcess, treeRssBytes } from './processes';
import { jvmServices, type JvmService } from './services';
import { STACK_HOST, STACK_PORTS } from './settings';
import { runningPid, upStack, type StepEvent } from './start-up';

export { exactlyOnceSourceFor, jvmTemplateValues, type StepEvent } from './start-up';

export type ServiceName = 'postgres' | JvmService['name'];
export const SERVICE_NAMES: readonly ServiceName[] = ['postgres', 'kafka', 'registry', 'connect'];

export interface ServiceStatus {
  name: ServiceName;
  ports: number[];
  pid?: number;
  running: boolean;
  ready: boolean;
  detail: string;
  rssBytes: number;
  logFile: string;
}

export interface Stack {
  readonly config: StackConfig;
  readonly paths: StackPaths;
  up(onStep?: (event: StepEvent) => void): Promise<{ totalMs: number; startedAny: boolean }>;
  down(options?: { clean?: boolean }, onStep?: (event: StepEvent) => void): Promise<void>;
  status(): Promise<ServiceStatus[]>;
  logFile(name: ServiceName): string;
  /**
   * Stops one service, for fault injection (the chaos run): `kill` sends SIGKILL to a JVM (no shutdown
   * hooks, as in a crash) or to PostgreSQL's postmaster (no shutdown checkpoint: the next start runs crash
   * recovery; its backends exit by themselves once they see it gone, and are waited for, since a new
   * postmaster refuses to start while they hold the shared memory); otherwise it stops gracefully
   * (PostgreSQL: fast shutdown). `up()` starts it again.
   */
  stopService(name: ServiceName, options?: { kill?: boolean }): Promise<'stopped' | 'killed' | 'not running'>;
}

export function createStack(options: StackOptions = {}): Stack {
  const config = resolveStackConfig(options);
  const paths = stackPaths(config.stateDir, config.cacheDir);
  const services = (): JvmService[] => {
    const { java, registryJava } = javaRuntimes(config);
    return jvmServices(config, paths, java, registryJava);
  };

  return {
    config,
    paths,

    logFile(name) {
      if (name === 'postgres') {
        return existsSync(join(paths.stateDir, 'postgres-root')) ? pg.postgresLayout(paths).logFile : join(paths.stateDir, 'postgres', 'postgres.log');
      }
      return join(paths.logDir, `${name}.log`);
    },
    up: (onStep = () => {}) => upStack(config, paths, services, onStep),
    stopService: (name, { kill = false } = {}) => stopService(paths, services, name, kill),
    down: ({ clean = false } = {}, onStep = () => {}) => downStack(paths, clean, onStep),
    status: () => stackStatus(paths, services),
  };
}

function javaRuntimes(config: StackConfig): { java: JavaRuntime; registryJava: JavaRuntime } {
  return {
    java: findJava('Kafka and Kafka Connect', 17, config.javaHome, 'JAVA_HOME'),
    registryJava: findJava('Apicurio Registry 3.3', 21, config.registryJavaHome, 'OUTBOX_REGISTRY_JAVA_HOME'),
  };
}

async function stopService(paths: StackPaths, services: () => JvmService[], name: ServiceName, kill: boolean): Promise<'stopped' | 'killed' | 'not running'> {
  if (name === 'postgres') {
    const install = pg.findPostgres();
    const layout = existsSync(join(paths.stateDir, 'postgres-root')) ? pg.postgresLayout(paths) : undefined;
    if (!install || !layout) return 'not running';
    if (kill) {
      const pid = pg.postgresPid(layout);
      if (pid === undefined || !isAlive(pid)) return 'not running';
      const children = childPidsOf(pid);
      process.kill(pid, 'SIGKILL');
      while (isAlive(pid)) await sleep(50);
      // Backends notice the postmaster's death and exit (a busy one at its next check): 15 s, then SIGKILL.
      const deadline = Date.now() + 15_000;
      while (children.some(isAlive) && Date.now() < deadline) await sleep(100);
      for (const child of children.filter(isAlive)) {
        try {
          process.kill(child, 'SIGKILL');
        } catch {
          // it exited meanwhile
        }
      }
      while (children.some(isAlive)) await sleep(50);
      // Until the dead postmaster is reaped too: `pg_ctl status` (kill 0) counts a zombie as a running
      // server, so up() would not start it and then see it "exit during start-up".
      const reaped = Date.now() + 10_000;
      while (existsSync(`/proc/${pid}`) && Date.now() < reaped) await sleep(100);
      return 'killed';
    }
    return pg.stopPostgres(install, layout) ? 'stopped' : 'not running';
  }
  const pid = runningPid(paths, name);
  if (pid === undefined) return 'not running';
  if (!kill) {
    const outcome = await stopProcess(pid, name === 'connect' ? 30_000 : 20_000);
    return outcome === 'absent' ? 'not running' : outcome;
  }
  process.kill(pid, 'SIGKILL');
  // Until the process is gone and its ports are free: up() refuses a port still held.
  const ports = services().find((s) => s.name === name)?.ports ?? [];
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const held = isAlive(pid) || (await Promise.all(ports.map((p) => portInUse(p, STACK_HOST)))).some(Boolean);
    if (!held) break;
    await sleep(100);
  }
  return 'killed';
}

async function downStack(paths: StackPaths, clean: boolean, onStep: (event: StepEvent) => void): Promise<void> {
  for (const name of ['connect', 'registry', 'kafka'] as const) {
    const t = Date.now();
    const pidFile = join(paths.pidDir, `${name}.pid`);
    const pid = runningPid(paths, name);
    const outcome = pid === undefined ? 'not running' : await stopProcess(pid, name === 'connect' ? 30_000 : 20_000);
    removeFile(pidFile);
    onStep({ step: name, ms: Date.now() - t, detail: outcome === 'absent' ? 'not running' : outcome });
  }
  const t = Date.now();
  const install = pg.findPostgres();
  const layout = existsSync(join(paths.stateDir, 'postgres-root')) ? pg.postgresLayout(paths) : undefined;
  if (clean && layout && !install && existsSync(join(layout.dataDir, 'postmaster.pid'))) {
    throw new OutboxError('STACK_POSTGRES_MISSING', `Cannot stop the cluster in ${layout.dataDir}: no PostgreSQL binaries under /usr/lib/postgresql. Refusing --clean while it may run; stop it by hand first.`);
  }
  const stopped = install && layout ? pg.stopPostgres(install, layout) : false;
  onStep({ step: 'postgres', ms: Date.now() - t, detail: stopped ? 'stopped' : 'not running' });
  for (const { version } of POSTGRES_MATRIX) {
    const m = Date.now();
    if (stopMatrixCluster(paths, version, { clean })) onStep({ step: 'postgres', ms: Date.now() - m, detail: `PostgreSQL ${version} (version matrix) stopped` });
  }
  if (clean) {
    if (layout && layout.root !== join(paths.stateDir, 'postgres')) rmSync(layout.root, { recursive: true, force: true });
    rmSync(paths.stateDir, { recursive: true, force: true });
    onStep({ step: 'clean', ms: 0, detail: `removed ${paths.stateDir}${layout ? ` and ${layout.root}` : ''} (the jar cache ${paths.cacheDir} is kept)` });
  }
}

async function quickProbe(probe: Probe): Promise<{ ready: boolean; detail: string }> {
  try {
    return { ready: true, detail: await probe() };
  } catch (error) {
    return { ready: false, detail: describeFailure(error) };
  }
}

async function stackStatus(paths: StackPaths, services: () => JvmService[]): Promise<ServiceStatus[]> {
  const out: ServiceStatus[] = [];
  const install = pg.findPostgres();
  const layout = existsSync(join(paths.stateDir, 'postgres-root')) ? pg.postgresLayout(paths) : undefined;
  const pgPid = install && layout && pg.postgresRunning(install, layout) ? pg.postgresPid(layout) : undefined;
  out.push({
    name: 'postgres',
    ports: [STACK_PORTS.postgres],
    pid: pgPid,
    running: pgPid !== undefined,
    ...(pgPid !== undefined ? await quickProbe(() => probePostgres()) : { ready: false, detail: 'not running' }),
    rssBytes: pgPid !== undefined ? treeRssBytes(pgPid) : 0,
    logFile: layout?.logFile ?? join(paths.stateDir, 'postgres', 'postgres.log'),
  });
  let jvms: JvmService[] = [];
  try {
    jvms = services();
  } catch {
    // No suitable Java: status still reports what runs, probing by port only.
  }
  for (const name of ['kafka', 'registry', 'connect'] as const) {
    const service = jvms.find((s) => s.name === name);
    const pid = runningPid(paths, name);
    const probeResult = service && pid !== undefined ? await quickProbe(service.probe) : { ready: false, detail: 'not running' };
    out.push({
      name,
      ports: service?.ports ?? [],
      pid,
      running: pid !== undefined,
      ...probeResult,
      rssBytes: pid !== undefined ? treeRssBytes(pid) : 0,
      logFile: join(paths.logDir, `${name}.log`),
    });
  }
  return out;
}
