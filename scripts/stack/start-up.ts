import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { OutboxError } from 'outbox-router/errors';
import { DEFAULT_EXACTLY_ONCE_SOURCE, type ExactlyOnceSource, type StackConfig } from './config';
import { renderClusterConfigs, type ClusterRenderOptions } from './cluster-configs';
import { ensureJars } from './fetch-jars';
import type { StackPaths } from './paths';
import { clusterProxyRunning, upClusterPostgres } from './cluster-postgres';
import * as pg from './postgres';
import { describeFailure, probePostgres, type Probe } from './probes';
import { findProcesses, isAlive, ownedPid, portInUse, removeFile, run, spawnDetached, tailLines } from './processes';
import { allJvmSlots, mainNeedle, stackMarker, type JvmService, type JvmServiceName } from './services';
import { CLUSTER, KAFKA, POSTGRES, STACK_HOST, STACK_PORTS, type StackProfile } from './settings';
import { renderTemplateFile } from './template';

/** One line of progress: a step finished (or was skipped) after `ms`. */
export interface StepEvent {
  step: string;
  ms: number;
  detail: string;
}

/** Progress of a start-up: each `step` reports the time since the previous one; `total` since the first. */
export function stepTimer(onStep: (event: StepEvent) => void): { step(name: string, detail: string): void; sinceLast(): number; total(): number } {
  const t0 = Date.now();
  let t = t0;
  return {
    step(name, detail) {
      const now = Date.now();
      onStep({ step: name, ms: now - t, detail });
      t = now;
    },
    sinceLast: () => Date.now() - t,
    total: () => Date.now() - t0,
  };
}

/**
 * `stack up`: Java, jars, a port preflight, the rendered configs, PostgreSQL, then the JVMs. Each service
 * already running (ours) is left as it is.
 */
export async function upStack(
  config: StackConfig,
  paths: StackPaths,
  profile: StackProfile,
  services: () => JvmService[],
  onStep: (event: StepEvent) => void,
): Promise<{ totalMs: number; startedAny: boolean }> {
  const { step, sinceLast, total } = stepTimer(onStep);
  const jvms = services();
  const registry = jvms.find((s) => s.group === 'registry') as JvmService;
  step('java', `Kafka/Connect on Java ${jvms[0]?.java.version} (${jvms[0]?.java.home}); registry on Java ${registry.java.version}`);
  const fetched = ensureJars(paths, (name) => onStep({ step: 'download', ms: sinceLast(), detail: `fetching ${name} from Maven Central…` }));
  await preflightPorts(paths, jvms);
  step('jars', fetched.length ? `downloaded ${fetched.join(', ')} into ${paths.cacheDir}` : `cached in ${paths.cacheDir}`);
  const exactlyOnceSource = exactlyOnceSourceFor(config, paths, profile);
  renderConfigs(paths, profile, { exactlyOnceSource, rebalanceDelayMs: config.connectRebalanceDelayMs });
  step('postgres', await upDatabase(config, paths, profile, onStep));

  const ready = (service: JvmService, pid: number) => waitReady(config, service.name, service.probe, service.logFile, pid);
  const already = (started: boolean) => (started ? '' : ' (already running)');
  // The brokers and the registry are independent: start them all, then Connect once Kafka answers.
  // Each broker of the cluster is ready only once all three are (kafkaNodeProbe), so all start first.
  const kafkas = jvms.filter((s) => s.group === 'kafka');
  const kafkaStarts = [];
  for (const kafka of kafkas) kafkaStarts.push(await startJvm(paths, kafka));
  const registryStart = await startJvm(paths, registry);
  let startedAny = registryStart.started || kafkaStarts.some((k) => k.started);
  for (const [i, kafka] of kafkas.entries()) {
    const start = kafkaStarts[i] as StartedJvm;
    step(kafka.name, `${await ready(kafka, start.pid)}${already(start.started)}`);
  }
  const connects = jvms.filter((s) => s.group === 'connect');
  const connectStarts = [];
  for (const connect of connects) connectStarts.push(await startJvm(paths, connect));
  startedAny ||= connectStarts.some((c) => c.started);
  step('registry', `${await ready(registry, registryStart.pid)}${already(registryStart.started)}`);
  const eos = `exactly.once.source.support=${exactlyOnceSource}`;
  for (const [i, connect] of connects.entries()) {
    const start = connectStarts[i] as StartedJvm;
    step(connect.name, `${await ready(connect, start.pid)}${start.started ? ` (${eos})` : ` (already running: ${eos} applies from its next start, after stack down)`}`);
  }
  return { totalMs: total(), startedAny };
}

/**
 * The database of a profile: the single profile's one PostgreSQL on 55432, or the cluster profile's
 * PostgreSQL 17 primary + synchronous standby behind a proxy on the same address (cluster-postgres.ts).
 */
async function upDatabase(config: StackConfig, paths: StackPaths, profile: StackProfile, onStep: (event: StepEvent) => void): Promise<string> {
  return profile === 'cluster' ? upClusterPostgres(paths, onStep) : upPostgres(config, paths);
}

/** The `${…}` values of connect/kafka-server.properties, connect-distributed.properties and log4j2.properties. */
export function jvmTemplateValues(
  paths: StackPaths,
  { exactlyOnceSource = DEFAULT_EXACTLY_ONCE_SOURCE }: { exactlyOnceSource?: ExactlyOnceSource } = {},
): Record<string, string | number> {
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
    exactlyOnceSource,
  };
}

/** Our running JVM for a service: by its pid file, else by the marker and its main class + properties on its command line. */
export function runningPid(paths: StackPaths, name: JvmServiceName): number | undefined {
  const marker = stackMarker(paths);
  const pidFile = join(paths.pidDir, `${name}.pid`);
  const slot = allJvmSlots(paths).find((s) => s.name === name);
  const pid = ownedPid(pidFile, marker) ?? (slot ? findProcesses(marker, mainNeedle(slot))[0] : undefined);
  if (pid !== undefined && ownedPid(pidFile, marker) === undefined) {
    mkdirSync(paths.pidDir, { recursive: true });
    writeFileSync(pidFile, `${pid}\n`);
  }
  return pid;
}

/**
 * The worker's exactly.once.source.support: the one asked for (OUTBOX_STACK_EXACTLY_ONCE), else the one the
 * rendered worker config already has, else Kafka's default. Sticky, so a `stack up` without the variable
 * (the integration tests' setup, the chaos run restarting a killed Connect) does not switch it back.
 */
export function exactlyOnceSourceFor(
  config: Pick<StackConfig, 'exactlyOnceSource'>,
  paths: Pick<StackPaths, 'configDir'>,
  profile: StackProfile = 'single',
): ExactlyOnceSource {
  if (config.exactlyOnceSource) return config.exactlyOnceSource;
  const rendered = join(paths.configDir, profile === 'single' ? 'connect-distributed.properties' : `${CLUSTER.connectWorkers[0].name}.properties`);
  const previous = existsSync(rendered) ? /^exactly\.once\.source\.support=(enabled|disabled)\s*$/m.exec(readFileSync(rendered, 'utf8'))?.[1] : undefined;
  return (previous as ExactlyOnceSource | undefined) ?? DEFAULT_EXACTLY_ONCE_SOURCE;
}

function renderConfigs(paths: StackPaths, profile: StackProfile, options: ClusterRenderOptions): void {
  mkdirSync(paths.configDir, { recursive: true });
  mkdirSync(paths.logDir, { recursive: true });
  const values = jvmTemplateValues(paths, { exactlyOnceSource: options.exactlyOnceSource });
  const templates = profile === 'single' ? ['kafka-server.properties', 'connect-distributed.properties', 'log4j2.properties'] : ['log4j2.properties'];
  for (const template of templates) {
    writeFileSync(join(paths.configDir, template), renderTemplateFile(join(paths.connectTemplates, template), values));
  }
  if (profile === 'cluster') renderClusterConfigs(paths, options);
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

export async function waitReady(config: Pick<StackConfig, 'readyTimeoutMs'>, service: string, probe: Probe, logFile: string, pid?: number): Promise<string> {
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

/** Every port a service we will start needs, checked before anything starts: fail in 1 s, not 20. */
async function preflightPorts(paths: StackPaths, jvms: JvmService[]): Promise<void> {
  const install = pg.findPostgres();
  const pgUp = (install !== undefined && pg.postgresRunning(install, pg.postgresLayout(paths))) || clusterProxyRunning(paths);
  if (!pgUp) await assertPortsFree('postgres', [STACK_PORTS.postgres], pg.postgresLayout(paths).logFile);
  for (const service of jvms) {
    if (runningPid(paths, service.name) === undefined) await assertPortsFree(service.name, service.ports, service.logFile);
  }
}

async function upPostgres(config: StackConfig, paths: StackPaths): Promise<string> {
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
  await waitReady(config, 'postgres', () => probePostgres('postgres'), layout.logFile, pg.postgresPid(layout));
  await pg.ensureAppDatabase();
  const fact = await probePostgres();
  return `${fact}${created ? ', new cluster' : ''} (port ${STACK_PORTS.postgres}, database ${POSTGRES.database})`;
}

/** Formats a broker's log.dirs the first time, with the stack's fixed cluster id (all three nodes share it). */
function formatKafka(paths: StackPaths, service: JvmService): void {
  const dataDir = service.dataDir ?? paths.kafkaDataDir;
  if (existsSync(join(dataDir, 'meta.properties'))) return;
  const result = run(service.java.bin, [
    '-Xmx256m', `-Dlog4j2.configurationFile=${join(paths.configDir, 'log4j2.properties')}`, '-cp', join(paths.kafkaLibDir, '*'),
    'kafka.tools.StorageTool', 'format', '-t', KAFKA.clusterId, '-c', service.configFile ?? '', '-g',
  ]);
  if (result.status !== 0) throw serviceFailure(service.name, service.logFile, `storage format failed: ${result.output.trim().split('\n').slice(-3).join(' ')}`);
}

interface StartedJvm {
  pid: number;
  started: boolean;
}

/** Starts a JVM service unless ours is already running; returns its pid and whether we started it. */
async function startJvm(paths: StackPaths, service: JvmService): Promise<StartedJvm> {
  const existing = runningPid(paths, service.name);
  if (existing !== undefined) return { pid: existing, started: false };
  removeFile(service.pidFile);
  await assertPortsFree(service.name, service.ports, service.logFile);
  if (service.group === 'kafka') formatKafka(paths, service);
  const pid = spawnDetached({ command: service.java.bin, args: service.args, logFile: service.logFile, pidFile: service.pidFile, cwd: paths.stateDir, env: service.env });
  return { pid, started: true };
}
