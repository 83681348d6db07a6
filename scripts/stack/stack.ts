import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { OutboxError } from 'outbox-router/errors';
import { resolveStackConfig, type StackConfig, type StackOptions } from './config';
import { ensureJars } from './fetch-jars';
import { findJava, type JavaRuntime } from './java';
import { stackPaths, type StackPaths } from './paths';
import * as pg from './postgres';
import { describeFailure, probePostgres, type Probe } from './probes';
import { findProcesses, isAlive, ownedPid, portInUse, removeFile, run, spawnDetached, stopProcess, tailLines, treeRssBytes } from './processes';
import { jvmServices, MAIN_NEEDLES, stackMarker, type JvmService, type JvmServiceName } from './services';
import { KAFKA, POSTGRES, STACK_HOST, STACK_PORTS } from './settings';
import { renderTemplateFile } from './template';

export type ServiceName = 'postgres' | JvmService['name'];
export const SERVICE_NAMES: readonly ServiceName[] = ['postgres', 'kafka', 'registry', 'connect'];

/** One line of progress: a step finished (or was skipped) after `ms`. */
export interface StepEvent {
  step: string;
  ms: number;
  detail: string;
}

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
   * hooks, as in a crash); otherwise it stops gracefully (PostgreSQL: fast shutdown). `up()` starts it again.
   */
  stopService(name: ServiceName, options?: { kill?: boolean }): Promise<'stopped' | 'killed' | 'not running'>;
}

/** The `${…}` values of connect/kafka-server.properties, connect-distributed.properties and log4j2.properties. */
export function jvmTemplateValues(paths: StackPaths): Record<string, string | number> {
  return {
    host: STACK_HOST,
    kafkaPort: STACK_PORTS.kafka,
    kafkaControllerPort: STACK_PORTS.kafkaController,
    connectPort: STACK_PORTS.connect,
    dataDir: paths.kafkaDataDir,
    pluginPath: paths.pluginPath,
    connectGroupId: KAFKA.connectGroupId,
    connectConfigTopic: KAFKA.connectConfigTopic,
    connectOffsetTopic: KAFKA.connectOffsetTopic,
    connectStatusTopic: KAFKA.connectStatusTopic,
  };
}

export function createStack(options: StackOptions = {}): Stack {
  const config = resolveStackConfig(options);
  const paths = stackPaths(config.stateDir, config.cacheDir);

  const javaRuntimes = (): { java: JavaRuntime; registryJava: JavaRuntime } => ({
    java: findJava('Kafka and Kafka Connect', 17, config.javaHome, 'JAVA_HOME'),
    registryJava: findJava('Apicurio Registry 3.3', 21, config.registryJavaHome, 'OUTBOX_REGISTRY_JAVA_HOME'),
  });

  const services = (): JvmService[] => {
    const { java, registryJava } = javaRuntimes();
    return jvmServices(config, paths, java, registryJava);
  };

  function renderConfigs(): void {
    mkdirSync(paths.configDir, { recursive: true });
    mkdirSync(paths.logDir, { recursive: true });
    const values = jvmTemplateValues(paths);
    for (const [template, target] of [
      ['kafka-server.properties', 'kafka-server.properties'],
      ['connect-distributed.properties', 'connect-distributed.properties'],
      ['log4j2.properties', 'log4j2.properties'],
    ] as const) {
      writeFileSync(join(paths.configDir, target), renderTemplateFile(join(paths.connectTemplates, template), values));
    }
  }

  async function assertPortsFree(service: string, ports: number[], logFile: string): Promise<void> {
    for (const port of ports) {
      if (await portInUse(port, STACK_HOST)) {
        throw new OutboxError(
          'STACK_PORT_IN_USE',
          `Port ${STACK_HOST}:${port}, needed by ${service}, is already in use by a process this stack did not start. ` +
            `Find it with \`ss -ltnp 'sport = :${port}'\` and stop it (or run \`npm run stack:down\` in the checkout that started it). ` +
            `Log for ${service}: ${logFile}.`,
          { details: { service, port } },
        );
      }
    }
  }

  function serviceFailure(service: string, logFile: string, why: string): OutboxError {
    const tail = tailLines(logFile, 15).join('\n');
    return new OutboxError(
      'STACK_SERVICE_FAILED',
      `${service} ${why}. Log: ${logFile}${tail ? `; its last lines:\n${tail}` : ' (empty)'}\n` +
        'See docs/troubleshooting.md; `npm run stack:logs` shows every log.',
      { details: { service, log: logFile } },
    );
  }

  async function waitReady(service: string, probe: Probe, logFile: string, pid?: number): Promise<string> {
    const deadline = Date.now() + config.readyTimeoutMs;
    let last = 'no answer yet';
    while (Date.now() < deadline) {
      if (pid !== undefined && !isAlive(pid)) throw serviceFailure(service, logFile, `exited during start-up (last probe: ${last})`);
      try {
        return await probe();
      } catch (error) {
        last = describeFailure(error);
      }
      await sleep(250);
    }
    const timeout = serviceFailure(service, logFile, `was not ready after ${config.readyTimeoutMs / 1000} s (last probe: ${last})`);
    throw new OutboxError('STACK_NOT_READY', timeout.message, { retriable: true, details: timeout.details });
  }

  /** Our running JVM for a service: by its pid file, else by the marker on its command line. */
  function runningPid(name: JvmServiceName): number | undefined {
    const marker = stackMarker(paths);
    const pidFile = join(paths.pidDir, `${name}.pid`);
    const pid = ownedPid(pidFile, marker) ?? findProcesses(marker, MAIN_NEEDLES[name])[0];
    if (pid !== undefined && ownedPid(pidFile, marker) === undefined) {
      mkdirSync(paths.pidDir, { recursive: true });
      writeFileSync(pidFile, `${pid}\n`);
    }
    return pid;
  }

  /** Every port a service we will start needs, checked before anything starts: fail in 1 s, not 20. */
  async function preflightPorts(jvms: JvmService[]): Promise<void> {
    const install = pg.findPostgres();
    const pgUp = install !== undefined && pg.postgresRunning(install, pg.postgresLayout(paths));
    if (!pgUp) await assertPortsFree('postgres', [STACK_PORTS.postgres], pg.postgresLayout(paths).logFile);
    for (const service of jvms) {
      if (runningPid(service.name) === undefined) await assertPortsFree(service.name, service.ports, service.logFile);
    }
  }

  async function upPostgres(): Promise<string> {
    const install = pg.ensurePostgresInstalled();
    const layout = pg.postgresLayout(paths);
    const created = pg.initPostgres(install, paths, layout);
    if (!pg.postgresRunning(install, layout)) {
      await assertPortsFree('postgres', [STACK_PORTS.postgres], layout.logFile);
      try {
        pg.startPostgres(install, layout);
      } catch (error) {
        throw serviceFailure('postgres', layout.logFile, `did not start (${(error as Error).message.split('\n')[0]})`);
      }
    }
    await waitReady('postgres', () => probePostgres('postgres'), layout.logFile, pg.postgresPid(layout));
    await pg.ensureAppDatabase();
    const fact = await probePostgres();
    return `${fact}${created ? ', new cluster' : ''} (port ${STACK_PORTS.postgres}, database ${POSTGRES.database})`;
  }

  function formatKafka(service: JvmService): void {
    if (existsSync(join(paths.kafkaDataDir, 'meta.properties'))) return;
    const result = run(service.java.bin, [
      '-Xmx256m', `-Dlog4j2.configurationFile=${join(paths.configDir, 'log4j2.properties')}`, '-cp', join(paths.kafkaLibDir, '*'),
      'kafka.tools.StorageTool', 'format', '-t', KAFKA.clusterId, '-c', join(paths.configDir, 'kafka-server.properties'), '-g',
    ]);
    if (result.status !== 0) throw serviceFailure('kafka', service.logFile, `storage format failed: ${result.output.trim().split('\n').slice(-3).join(' ')}`);
  }

  /** Starts a JVM service unless ours is already running; returns its pid and whether we started it. */
  async function startJvm(service: JvmService): Promise<{ pid: number; started: boolean }> {
    const existing = runningPid(service.name);
    if (existing !== undefined) return { pid: existing, started: false };
    removeFile(service.pidFile);
    await assertPortsFree(service.name, service.ports, service.logFile);
    if (service.name === 'kafka') formatKafka(service);
    const pid = spawnDetached({ command: service.java.bin, args: service.args, logFile: service.logFile, pidFile: service.pidFile, cwd: paths.stateDir, env: service.env });
    return { pid, started: true };
  }

  return {
    config,
    paths,

    logFile(name) {
      if (name === 'postgres') {
        return existsSync(join(paths.stateDir, 'postgres-root')) ? pg.postgresLayout(paths).logFile : join(paths.stateDir, 'postgres', 'postgres.log');
      }
      return join(paths.logDir, `${name}.log`);
    },

    async up(onStep = () => {}) {
      const t0 = Date.now();
      let t = t0;
      const step = (name: string, detail: string) => {
        const now = Date.now();
        onStep({ step: name, ms: now - t, detail });
        t = now;
      };
      const jvms = services();
      step('java', `Kafka/Connect on Java ${jvms[0]?.java.version} (${jvms[0]?.java.home}); registry on Java ${jvms[1]?.java.version}`);
      const fetched = ensureJars(paths, (name) => onStep({ step: 'download', ms: Date.now() - t, detail: `fetching ${name} from Maven Central…` }));
      await preflightPorts(jvms);
      step('jars', fetched.length ? `downloaded ${fetched.join(', ')} into ${paths.cacheDir}` : `cached in ${paths.cacheDir}`);
      renderConfigs();
      step('postgres', await upPostgres());

      const byName = Object.fromEntries(jvms.map((s) => [s.name, s])) as Record<JvmService['name'], JvmService>;
      let startedAny = false;
      // Kafka and the registry are independent: start both, then Connect once Kafka answers.
      const kafka = await startJvm(byName.kafka);
      const registry = await startJvm(byName.registry);
      startedAny = kafka.started || registry.started;
      step('kafka', `${await waitReady('kafka', byName.kafka.probe, byName.kafka.logFile, kafka.pid)}${kafka.started ? '' : ' (already running)'}`);
      const connect = await startJvm(byName.connect);
      startedAny ||= connect.started;
      step('registry', `${await waitReady('registry', byName.registry.probe, byName.registry.logFile, registry.pid)}${registry.started ? '' : ' (already running)'}`);
      step('connect', `${await waitReady('connect', byName.connect.probe, byName.connect.logFile, connect.pid)}${connect.started ? '' : ' (already running)'}`);
      return { totalMs: Date.now() - t0, startedAny };
    },

    async stopService(name, { kill = false } = {}) {
      if (name === 'postgres') {
        const install = pg.findPostgres();
        const layout = existsSync(join(paths.stateDir, 'postgres-root')) ? pg.postgresLayout(paths) : undefined;
        if (!install || !layout) return 'not running';
        if (kill) {
          const pid = pg.postgresPid(layout);
          if (pid === undefined || !isAlive(pid)) return 'not running';
          process.kill(pid, 'SIGKILL');
          while (isAlive(pid)) await sleep(50);
          return 'killed';
        }
        return pg.stopPostgres(install, layout) ? 'stopped' : 'not running';
      }
      const pid = runningPid(name);
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
    },

    async down({ clean = false } = {}, onStep = () => {}) {
      for (const name of ['connect', 'registry', 'kafka'] as const) {
        const t = Date.now();
        const pidFile = join(paths.pidDir, `${name}.pid`);
        const pid = runningPid(name);
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
      if (clean) {
        if (layout && layout.root !== join(paths.stateDir, 'postgres')) rmSync(layout.root, { recursive: true, force: true });
        rmSync(paths.stateDir, { recursive: true, force: true });
        onStep({ step: 'clean', ms: 0, detail: `removed ${paths.stateDir}${layout ? ` and ${layout.root}` : ''} (the jar cache ${paths.cacheDir} is kept)` });
      }
    },

    async status() {
      const quick = async (probe: Probe): Promise<{ ready: boolean; detail: string }> => {
        try {
          return { ready: true, detail: await probe() };
        } catch (error) {
          return { ready: false, detail: describeFailure(error) };
        }
      };
      const out: ServiceStatus[] = [];
      const install = pg.findPostgres();
      const layout = existsSync(join(paths.stateDir, 'postgres-root')) ? pg.postgresLayout(paths) : undefined;
      const pgPid = install && layout && pg.postgresRunning(install, layout) ? pg.postgresPid(layout) : undefined;
      out.push({
        name: 'postgres',
        ports: [STACK_PORTS.postgres],
        pid: pgPid,
        running: pgPid !== undefined,
        ...(pgPid !== undefined ? await quick(() => probePostgres()) : { ready: false, detail: 'not running' }),
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
        const pid = runningPid(name);
        const probeResult = service && pid !== undefined ? await quick(service.probe) : { ready: false, detail: 'not running' };
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
    },
  };
}
