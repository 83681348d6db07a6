import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { OutboxError } from 'outbox-router/errors';
import { resolveStackConfig, type StackConfig, type StackOptions } from './config';
import { findJava, type JavaRuntime } from './java';
import { stackPaths, type StackPaths } from './paths';
import {
  clusterPostgresLog, clusterPostgresStatus, downClusterPostgres, failoverClusterPostgres, isClusterPostgresName, rebuildClusterStandby, stopClusterPostgres,
} from './cluster-postgres';
import * as pg from './postgres';
import type { FailoverReport, RebuildReport } from './postgres-ha';
import { POSTGRES_MATRIX, stopMatrixCluster } from './postgres-versions';
import { describeFailure, probePostgres, type Probe } from './probes';
import { isAlive, portInUse, removeFile, stopProcess, treeRssBytes } from './processes';
import { allJvmSlots, jvmLayout, jvmServices, type JvmService, type JvmSlot, type ServiceName, type ServiceStatus } from './services';
import { STACK_HOST, STACK_PORTS, type StackProfile } from './settings';
import { assertProfileSwitchable, effectiveProfile, recordProfile, servicesNamed } from './stack-profile';
import { runningPid, upStack, type StepEvent } from './start-up';

export { exactlyOnceSourceFor, jvmTemplateValues, type StepEvent } from './start-up';

export type { ServiceName } from './services';
export { serviceNames } from './stack-profile';
/** The single profile's services (the default); `serviceNames(profile)` for either. */
export const SERVICE_NAMES: readonly ServiceName[] = ['postgres', 'kafka', 'registry', 'connect'];

export type { ServiceStatus } from './services';

export interface Stack {
  readonly config: StackConfig;
  readonly paths: StackPaths;
  /** What this stack runs: asked for (--profile, OUTBOX_STACK_PROFILE), else recorded by the last `up`, else single. */
  readonly profile: StackProfile;
  up(onStep?: (event: StepEvent) => void): Promise<{ totalMs: number; startedAny: boolean }>;
  down(options?: { clean?: boolean }, onStep?: (event: StepEvent) => void): Promise<void>;
  status(): Promise<ServiceStatus[]>;
  logFile(name: ServiceName): string;
  /**
   * The services a name stands for in this profile: itself, or on the cluster profile `kafka` and
   * `connect` for all brokers or all workers (so the single profile's names keep their meaning: Kafka
   * down, Connect down). Throws STACK_PROFILE_MISMATCH for a name the profile does not run.
   */
  resolveServices(name: ServiceName): ServiceName[];
  /**
   * Stops one service, for fault injection (the chaos run): `kill` sends SIGKILL to a JVM (no shutdown
   * hooks, as in a crash) or to PostgreSQL's postmaster (no shutdown checkpoint: the next start runs crash
   * recovery; its backends exit by themselves once they see it gone, and are waited for, since a new
   * postmaster refuses to start while they hold the shared memory); otherwise it stops gracefully
   * (PostgreSQL: fast shutdown). On the cluster profile, `kafka-2` stops one broker and `kafka` all of
   * them (resolveServices). `up()` starts again what is down, and only that.
   */
  stopService(name: ServiceName, options?: { kill?: boolean }): Promise<'stopped' | 'killed' | 'not running'>;
  /**
   * The cluster profile's primary failover: SIGKILL of the primary, promotion of the standby, the proxy on
   * the stack's PostgreSQL address moved to it. The old primary stays down until rebuildStandby().
   */
  failoverPostgres(onStep?: (event: StepEvent) => void): Promise<FailoverReport>;
  /** The cluster profile: the node that is not the primary back as its synchronous standby. */
  rebuildStandby(onStep?: (event: StepEvent) => void): Promise<RebuildReport>;
}

export function createStack(options: StackOptions = {}): Stack {
  const config = resolveStackConfig(options);
  const paths = stackPaths(config.stateDir, config.cacheDir);
  const profile = effectiveProfile(config, paths);
  const services = (): JvmService[] => {
    const { java, registryJava } = javaRuntimes(config);
    return jvmServices(config, paths, java, registryJava, profile);
  };
  const resolveServices = (name: ServiceName): ServiceName[] => servicesNamed(profile, name);

  return {
    config,
    paths,
    profile,

    logFile(name) {
      if (isClusterPostgresName(name) || (profile === 'cluster' && name === 'postgres')) return clusterPostgresLog(paths, name);
      if (name === 'postgres') {
        return existsSync(join(paths.stateDir, 'postgres-root')) ? pg.postgresLayout(paths).logFile : join(paths.stateDir, 'postgres', 'postgres.log');
      }
      return join(paths.logDir, `${name}.log`);
    },
    resolveServices,
    async up(onStep = () => {}) {
      assertProfileSwitchable(paths, profile);
      recordProfile(paths, profile);
      return upStack(config, paths, profile, services, onStep);
    },
    async stopService(name, { kill = false } = {}) {
      const outcomes: Array<'stopped' | 'killed' | 'not running'> = [];
      for (const target of resolveServices(name)) outcomes.push(await stopService(paths, profile, target, kill));
      return outcomes.find((o) => o !== 'not running') ?? 'not running';
    },
    async failoverPostgres(onStep = () => {}) {
      assertCluster(profile, 'failover');
      return failoverClusterPostgres(paths, onStep);
    },
    async rebuildStandby(onStep = () => {}) {
      assertCluster(profile, 'rebuildStandby');
      return rebuildClusterStandby(paths, onStep);
    },
    down: ({ clean = false } = {}, onStep = () => {}) => downStack(paths, profile, clean, onStep),
    status: () => stackStatus(paths, profile, services),
  };
}

function javaRuntimes(config: StackConfig): { java: JavaRuntime; registryJava: JavaRuntime } {
  return {
    java: findJava('Kafka and Kafka Connect', 17, config.javaHome, 'JAVA_HOME'),
    registryJava: findJava('Apicurio Registry 3.3', 21, config.registryJavaHome, 'OUTBOX_REGISTRY_JAVA_HOME'),
  };
}

function assertCluster(profile: StackProfile, what: string): void {
  if (profile === 'cluster') return;
  throw new OutboxError('STACK_PROFILE_MISMATCH', `${what} needs the cluster profile's PostgreSQL primary and standby; this stack runs the ${profile} profile. Start it with \`stack down --clean\`, then \`stack up --profile cluster\`.`, { details: { profile } });
}

async function stopService(paths: StackPaths, profile: StackProfile, name: ServiceName, kill: boolean): Promise<'stopped' | 'killed' | 'not running'> {
  if (isClusterPostgresName(name) || (profile === 'cluster' && name === 'postgres')) return stopClusterPostgres(paths, name, kill);
  if (name === 'postgres') {
    const install = pg.findPostgres();
    const layout = existsSync(join(paths.stateDir, 'postgres-root')) ? pg.postgresLayout(paths) : undefined;
    if (!install || !layout) return 'not running';
    // SIGKILL: backends notice the postmaster's death and exit; waited for, and the postmaster reaped (see killPostgres).
    if (kill) return (await pg.killPostgres(layout)) ? 'killed' : 'not running';
    return pg.stopPostgres(install, layout) ? 'stopped' : 'not running';
  }
  const pid = runningPid(paths, name);
  if (pid === undefined) return 'not running';
  if (!kill) {
    const outcome = await stopProcess(pid, graceMs(name));
    return outcome === 'absent' ? 'not running' : outcome;
  }
  process.kill(pid, 'SIGKILL');
  // Until the process is gone and its ports are free: up() refuses a port still held.
  const ports = jvmLayout(profile, paths).find((s) => s.name === name)?.ports ?? [];
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const held = isAlive(pid) || (await Promise.all(ports.map((p) => portInUse(p, STACK_HOST)))).some(Boolean);
    if (!held) break;
    await sleep(100);
  }
  return 'killed';
}

/** A worker finishes its tasks' offset commits, a broker moves its leaderships: both get time to. */
function graceMs(name: ServiceName): number {
  return name.startsWith('connect') ? 30_000 : 20_000;
}

async function downStack(paths: StackPaths, profile: StackProfile, clean: boolean, onStep: (event: StepEvent) => void): Promise<void> {
  // Whatever profile runs, or ran before a switch: every JVM either profile has. A group (the workers,
  // then the brokers) stops together: one broker after another would hand every leadership to the last
  // one, and the last two would wait for a quorum that is already gone.
  const slots = allJvmSlots(paths);
  const own = new Set(jvmLayout(profile, paths).map((s) => s.name));
  for (const group of ['connect', 'registry', 'kafka'] as const) {
    await Promise.all(slots.filter((s) => s.group === group).map((slot) => stopJvm(paths, slot, own.has(slot.name), onStep)));
  }
  const t = Date.now();
  const install = pg.findPostgres();
  const layout = existsSync(join(paths.stateDir, 'postgres-root')) ? pg.postgresLayout(paths) : undefined;
  if (clean && layout && !install && existsSync(join(layout.dataDir, 'postmaster.pid'))) {
    throw new OutboxError('STACK_POSTGRES_MISSING', `Cannot stop the cluster in ${layout.dataDir}: no PostgreSQL binaries under /usr/lib/postgresql. Refusing --clean while it may run; stop it by hand first.`);
  }
  const stopped = install && layout ? pg.stopPostgres(install, layout) : false;
  onStep({ step: 'postgres', ms: Date.now() - t, detail: stopped ? 'stopped' : 'not running' });
  // The cluster profile's pair, whatever profile runs now (as with the JVMs above).
  if (existsSync(join(paths.stateDir, 'postgres-ha'))) await downClusterPostgres(paths, clean, onStep);
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

/** Stops one JVM; reports it if it ran or belongs to the profile (the other profile's names stay quiet). */
async function stopJvm(paths: StackPaths, slot: JvmSlot, report: boolean, onStep: (event: StepEvent) => void): Promise<void> {
  const t = Date.now();
  const pid = runningPid(paths, slot.name);
  const outcome = pid === undefined ? 'not running' : await stopProcess(pid, graceMs(slot.name));
  removeFile(join(paths.pidDir, `${slot.name}.pid`));
  if (pid !== undefined || report) {
    onStep({ step: slot.name, ms: Date.now() - t, detail: outcome === 'absent' ? 'not running' : outcome });
  }
}

async function stackStatus(paths: StackPaths, profile: StackProfile, services: () => JvmService[]): Promise<ServiceStatus[]> {
  const out: ServiceStatus[] = [];
  if (profile === 'cluster') out.push(...(await clusterPostgresStatus(paths)));
  else out.push(await singlePostgresStatus(paths));
  let jvms: JvmService[] = [];
  try {
    jvms = services();
  } catch {
    // No suitable Java: status still reports what runs, without probing.
  }
  for (const slot of jvmLayout(profile, paths)) {
    const service = jvms.find((s) => s.name === slot.name);
    const pid = runningPid(paths, slot.name);
    const probeResult = service && pid !== undefined ? await quickProbe(service.probe) : { ready: false, detail: 'not running' };
    out.push({
      name: slot.name,
      ports: slot.ports,
      pid,
      running: pid !== undefined,
      ...probeResult,
      rssBytes: pid !== undefined ? treeRssBytes(pid) : 0,
      logFile: join(paths.logDir, `${slot.name}.log`),
    });
  }
  return out;
}

async function singlePostgresStatus(paths: StackPaths): Promise<ServiceStatus> {
  const install = pg.findPostgres();
  const layout = existsSync(join(paths.stateDir, 'postgres-root')) ? pg.postgresLayout(paths) : undefined;
  const pgPid = install && layout && pg.postgresRunning(install, layout) ? pg.postgresPid(layout) : undefined;
  return {
    name: 'postgres',
    ports: [STACK_PORTS.postgres],
    pid: pgPid,
    running: pgPid !== undefined,
    ...(pgPid !== undefined ? await quickProbe(() => probePostgres()) : { ready: false, detail: 'not running' }),
    rssBytes: pgPid !== undefined ? treeRssBytes(pgPid) : 0,
    logFile: layout?.logFile ?? join(paths.stateDir, 'postgres', 'postgres.log'),
  };
}
