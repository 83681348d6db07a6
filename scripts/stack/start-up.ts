import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { OutboxError } from 'outbox-router/errors';
import { DEFAULT_EXACTLY_ONCE_SOURCE, type ExactlyOnceSource, type StackConfig } from './config';
import { ensureJars } from './fetch-jars';
import type { StackPaths } from './paths';
import * as pg from './postgres';
import { describeFailure, probePostgres, type Probe } from './probes';
import { findProcesses, isAlive, ownedPid, portInUse, removeFile, run, spawnDetached, tailLines } from './processes';
import { MAIN_NEEDLES, stackMarker, type JvmService, type JvmServiceName } from './services';
import { KAFKA, POSTGRES, STACK_HOST, STACK_PORTS } from './settings';
import { renderTemplateFile } from './template';

/** One line of progress: a step finished (or was skipped) after `ms`. */
export interface StepEvent {
  step: string;
  ms: number;
  detail: string;
}

/**
 * `stack up`: Java, jars, a port preflight, the rendered configs, PostgreSQL, then the JVMs. Each service
 * already running (ours) is left as it is.
 */
export async function upStack(
  config: StackConfig,
  paths: StackPaths,
  services: () => JvmService[],
  onStep: (event: StepEvent) => void,
): Promise<{ totalMs: number; startedAny: boolean }> {
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
  await preflightPorts(paths, jvms);
  step('jars', fetched.length ? `downloaded ${fetched.join(', ')} into ${paths.cacheDir}` : `cached in ${paths.cacheDir}`);
  const exactlyOnceSource = exactlyOnceSourceFor(config, paths);
  renderConfigs(paths, exactlyOnceSource);
  step('postgres', await upPostgres(config, paths));

  const byName = Object.fromEntries(jvms.map((s) => [s.name, s])) as Record<JvmService['name'], JvmService>;
  let startedAny = false;
  const ready = (name: JvmServiceName, pid: number) => waitReady(config, name, byName[name].probe, byName[name].logFile, pid);
  // Kafka and the registry are independent: start both, then Connect once Kafka answers.
  const kafka = await startJvm(paths, byName.kafka);
  const registry = await startJvm(paths, byName.registry);
  startedAny = kafka.started || registry.started;
  step('kafka', `${await ready('kafka', kafka.pid)}${kafka.started ? '' : ' (already running)'}`);
  const connect = await startJvm(paths, byName.connect);
  startedAny ||= connect.started;
  step('registry', `${await ready('registry', registry.pid)}${registry.started ? '' : ' (already running)'}`);
  const eos = `exactly.once.source.support=${exactlyOnceSource}`;
  step('connect', `${await ready('connect', connect.pid)}${connect.started ? ` (${eos})` : ` (already running: ${eos} applies from its next start, after stack down)`}`);
  return { totalMs: Date.now() - t0, startedAny };
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

/** Our running JVM for a service: by its pid file, else by the marker on its command line. */
export function runningPid(paths: StackPaths, name: JvmServiceName): number | undefined {
  const marker = stackMarker(paths);
  const pidFile = join(paths.pidDir, `${name}.pid`);
  const pid = ownedPid(pidFile, marker) ?? findProcesses(marker, MAIN_NEEDLES[name])[0];
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
export function exactlyOnceSourceFor(config: Pick<StackConfig, 'exactlyOnceSource'>, paths: Pick<StackPaths, 'configDir'>): ExactlyOnceSource {
  if (config.exactlyOnceSource) return config.exactlyOnceSource;
  const rendered = join(paths.configDir, 'connect-distributed.properties');
  const previous = existsSync(rendered) ? /^exactly\.once\.source\.support=(enabled|disabled)\s*$/m.exec(readFileSync(rendered, 'utf8'))?.[1] : undefined;
  return (previous as ExactlyOnceSource | undefined) ?? DEFAULT_EXACTLY_ONCE_SOURCE;
}

function renderConfigs(paths: StackPaths, exactlyOnceSource: ExactlyOnceSource): void {
  mkdirSync(paths.configDir, { recursive: true });
  mkdirSync(paths.logDir, { recursive: true });
  const values = jvmTemplateValues(paths, { exactlyOnceSource });
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

async function waitReady(config: StackConfig, service: string, probe: Probe, logFile: string, pid?: number): Promise<string> {
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
  const pgUp = install !== undefined && pg.postgresRunning(install, pg.postgresLayout(paths));
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

function formatKafka(paths: StackPaths, service: JvmService): void {
  if (existsSync(join(paths.kafkaDataDir, 'meta.properties'))) return;
  const result = run(service.java.bin, [
    '-Xmx256m', `-Dlog4j2.configurationFile=${join(paths.configDir, 'log4j2.properties')}`, '-cp', join(paths.kafkaLibDir, '*'),
    'kafka.tools.StorageTool', 'format', '-t', KAFKA.clusterId, '-c', join(paths.configDir, 'kafka-server.properties'), '-g',
  ]);
  if (result.status !== 0) throw serviceFailure('kafka', service.logFile, `storage format failed: ${result.output.trim().split('\n').slice(-3).join(' ')}`);
}

/** Starts a JVM service unless ours is already running; returns its pid and whether we started it. */
async function startJvm(paths: StackPaths, service: JvmService): Promise<{ pid: number; started: boolean }> {
  const existing = runningPid(paths, service.name);
  if (existing !== undefined) return { pid: existing, started: false };
  removeFile(service.pidFile);
  await assertPortsFree(service.name, service.ports, service.logFile);
  if (service.name === 'kafka') formatKafka(paths, service);
  const pid = spawnDetached({ command: service.java.bin, args: service.args, logFile: service.logFile, pidFile: service.pidFile, cwd: paths.stateDir, env: service.env });
  return { pid, started: true };
}
