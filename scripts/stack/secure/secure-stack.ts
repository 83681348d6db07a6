import { copyFileSync, chmodSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { applyKafkaAcls, planKafkaAcls } from 'outbox-router/acls';
import { outboxConfigSchema } from 'outbox-router/config';
import { OutboxError } from 'outbox-router/errors';
import { aptCommand, aptInstall } from '../apt-install';
import type { StackConfig } from '../config';
import { ensureJars } from '../fetch-jars';
import { findJava, type JavaRuntime } from '../java';
import { stackPaths, type StackPaths } from '../paths';
import * as pg from '../postgres';
import { describeFailure } from '../probes';
import { isAlive, ownedPid, portInUse, removeFile, run, spawnDetached, stopProcess, tailLines, treeRssBytes, which } from '../processes';
import { DEBEZIUM_PLUGIN_CLASSES, KAFKA } from '../settings';
import { stepTimer, waitReady as startUpWaitReady, type StepEvent } from '../start-up';
import type { ServiceStatus } from '../services';
import { ensureCerts, stackCertsAt, type StackCerts } from './certs';
import { secureGet, securePgClient, withSecureAdmin } from './secure-clients';
import {
  adminClientProperties, connectJaas, connectUsers, htpasswd, nginxConf, registryJdbcUrl, scramFormatArgs, secureConnectProperties, secureKafkaProperties, securePgHba, securePostgresConf,
} from './secure-configs';
import { SECURE_HOST, SECURE_PORTS, SECURE_POSTGRES } from './secure-settings';

export type SecureServiceName = 'postgres' | 'kafka' | 'registry' | 'registry-proxy' | 'connect';
export const SECURE_SERVICE_NAMES: readonly SecureServiceName[] = ['postgres', 'kafka', 'registry', 'registry-proxy', 'connect'];

/** A row of `stack status --profile secure`: the plain stack's row, with the secure stack's names. */
export type SecureServiceStatus = Omit<ServiceStatus, 'name'> & { name: SecureServiceName };

/** The secure stack's state: a folder beside the plain stack's (`<state>-secure`), so both can run at once. */
export function secureStackPaths(config: StackConfig): StackPaths {
  return stackPaths(`${config.stateDir.replace(/\/+$/, '')}-secure`, config.cacheDir);
}

export function secureCerts(paths: StackPaths): StackCerts {
  return stackCertsAt(join(paths.stateDir, 'tls'));
}

interface Runtime {
  java: JavaRuntime;
  registryJava: JavaRuntime;
}

const marker = (paths: StackPaths) => `-Doutbox.stack.dir=${paths.stateDir}`;
const pidFile = (paths: StackPaths, name: SecureServiceName) => join(paths.pidDir, `${name}.pid`);
const logFile = (paths: StackPaths, name: SecureServiceName) => (name === 'postgres' ? pg.postgresLayout(paths).logFile : join(paths.logDir, `${name}.log`));
const file = (paths: StackPaths, name: string) => join(paths.configDir, name);

const PORTS: Record<SecureServiceName, number[]> = {
  postgres: [SECURE_PORTS.postgres],
  kafka: [SECURE_PORTS.kafka, SECURE_PORTS.kafkaController, SECURE_PORTS.kafkaOauth],
  registry: [SECURE_PORTS.registryBackend, SECURE_PORTS.registryManagement],
  'registry-proxy': [SECURE_PORTS.registry],
  connect: [SECURE_PORTS.connect],
};

/** Our process of a service (the postmaster for PostgreSQL), by its pid file and the marker on its command line. */
function servicePid(paths: StackPaths, name: SecureServiceName): number | undefined {
  if (name === 'postgres') {
    const pid = pg.postgresPid(pg.postgresLayout(paths));
    return pid !== undefined && isAlive(pid) ? pid : undefined;
  }
  // nginx's command line carries its config file (in the state folder), the JVMs the marker.
  return ownedPid(pidFile(paths, name), name === 'registry-proxy' ? paths.stateDir : marker(paths));
}

/** A short fact when the service answers as it should, over TLS with credentials; rejects with why not. */
function probe(certs: StackCerts, name: SecureServiceName): () => Promise<string> {
  switch (name) {
    case 'postgres':
      return async () => {
        const client = securePgClient(certs);
        await client.connect();
        try {
          const { rows } = await client.query<{ v: string; ssl: boolean }>("SELECT current_setting('server_version') AS v, (SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()) AS ssl");
          return `PostgreSQL ${rows[0]?.v}, TLS ${rows[0]?.ssl ? 'on' : 'OFF'}, hostssl + scram-sha-256 only`;
        } finally {
          await client.end().catch(() => {});
        }
      };
    case 'kafka':
      return () => withSecureAdmin(certs, async (admin) => {
        const cluster = await admin.describeCluster();
        return `cluster ${cluster.clusterId}, SASL_SSL SCRAM-SHA-512 on ${SECURE_PORTS.kafka}, OAUTHBEARER on ${SECURE_PORTS.kafkaOauth}, ACLs enforced`;
      });
    case 'registry':
    case 'registry-proxy':
      return async () => {
        const subjects = await secureGet<unknown[]>(certs, 'registry', '/subjects');
        return `${subjects.length} subject(s), https + basic auth through nginx`;
      };
    case 'connect':
      return async () => {
        const plugins = await secureGet<Array<{ class: string }>>(certs, 'connect', '/connector-plugins?connectorsOnly=false');
        const missing = DEBEZIUM_PLUGIN_CLASSES.filter((c) => !plugins.some((p) => p.class === c));
        if (missing.length > 0) throw new Error(`Connect answers but does not list ${missing.join(', ')}`);
        return `${plugins.length} plugins, https + basic auth, clients as User:outbox-connect`;
      };
  }
}

function waitReady(config: StackConfig, paths: StackPaths, certs: StackCerts, name: SecureServiceName, pid?: number): Promise<string> {
  return startUpWaitReady(config, `secure ${name}`, probe(certs, name), logFile(paths, name), pid);
}

function failure(paths: StackPaths, name: SecureServiceName, why: string): OutboxError {
  const log = logFile(paths, name);
  const tail = tailLines(log, 15).join('\n');
  return new OutboxError('STACK_SERVICE_FAILED', `secure ${name} ${why}. Log: ${log}${tail ? `; its last lines:\n${tail}` : ' (empty)'}`, { details: { service: name, log } });
}

async function start(paths: StackPaths, name: SecureServiceName, command: string, args: string[], env?: NodeJS.ProcessEnv): Promise<{ pid: number; started: boolean }> {
  const existing = servicePid(paths, name);
  if (existing !== undefined) return { pid: existing, started: false };
  for (const port of PORTS[name]) {
    if (await portInUse(port, SECURE_HOST)) {
      throw new OutboxError('STACK_PORT_IN_USE', `Port ${SECURE_HOST}:${port}, needed by the secure stack's ${name}, is in use by a process it did not start. Find it with \`ss -ltnp 'sport = :${port}'\`.`, { details: { service: name, port } });
    }
  }
  removeFile(pidFile(paths, name));
  const pid = spawnDetached({ command, args, logFile: logFile(paths, name), pidFile: pidFile(paths, name), cwd: paths.stateDir, env });
  return { pid, started: true };
}

function ensureNginx(): string {
  const found = which('nginx') ?? (existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : undefined);
  if (found) return found;
  const outcome = aptInstall(['nginx-light'], {}, { recommends: false });
  const after = which('nginx') ?? (existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : undefined);
  if (outcome.ok && after) return after;
  throw new OutboxError('STACK_SERVICE_FAILED', `The secure profile puts the schema registry behind nginx (TLS and basic auth), which is not installed. Install it with \`${aptCommand(['nginx-light'])}\`.${outcome.ok ? '' : ` apt-get: ${outcome.reason} ${outcome.output}`}`);
}

/** PostgreSQL with TLS: its key and certificate copied where the `postgres` OS user owns them (it refuses a key others can read). */
async function upPostgres(config: StackConfig, paths: StackPaths, certs: StackCerts): Promise<string> {
  const install = pg.ensurePostgresInstalled();
  const layout = pg.postgresLayout(paths);
  const tlsDir = join(layout.root, 'tls');
  mkdirSync(tlsDir, { recursive: true });
  for (const [from, to] of [[certs.services.postgres.cert, 'server.crt'], [certs.services.postgres.key, 'server.key'], [certs.caCert, 'ca.crt']] as const) {
    copyFileSync(from, join(tlsDir, to));
    chmodSync(join(tlsDir, to), 0o600);
  }
  const conf = securePostgresConf({ cert: join(tlsDir, 'server.crt'), key: join(tlsDir, 'server.key'), ca: join(tlsDir, 'ca.crt') });
  const created = pg.initPostgres(install, paths, layout, { port: SECURE_PORTS.postgres, extraConf: conf, superuserPassword: SECURE_POSTGRES.password });
  writeFileSync(join(layout.dataDir, 'pg_hba.conf'), securePgHba());
  pg.chownToPostgres(layout.root);
  if (!pg.postgresRunning(install, layout)) {
    if (await portInUse(SECURE_PORTS.postgres, SECURE_HOST)) throw new OutboxError('STACK_PORT_IN_USE', `Port ${SECURE_HOST}:${SECURE_PORTS.postgres}, needed by the secure stack's PostgreSQL, is in use.`);
    pg.startPostgres(install, layout);
  }
  const fact = await waitReady(config, paths, certs, 'postgres', pg.postgresPid(layout));
  await pg.ensureAppDatabase(SECURE_PORTS.postgres, securePgClient(certs));
  return `${fact}${created ? ', new cluster' : ''} (port ${SECURE_PORTS.postgres})`;
}

function formatKafka(paths: StackPaths, java: JavaRuntime, properties: string): void {
  const dataDir = join(paths.stateDir, 'kafka-data');
  if (existsSync(join(dataDir, 'meta.properties'))) return;
  const result = run(java.bin, [
    '-Xmx256m', '-cp', join(paths.kafkaLibDir, '*'), 'kafka.tools.StorageTool', 'format', '-t', KAFKA.clusterId, '-c', properties, '-g', ...scramFormatArgs(),
  ]);
  if (result.status !== 0) throw failure(paths, 'kafka', `storage format failed: ${result.output.trim().split('\n').slice(-3).join(' ')}`);
}

/**
 * The ACLs of the default config's pipeline (`outbox kafka:acls` with no settings: the principals
 * User:outbox-connect, -router, -relay, -status, …), created by the stack's admin. Tests of other
 * consumers and topics apply their own config's plan the same way.
 */
async function applyDefaultAcls(certs: StackCerts): Promise<number> {
  const config = outboxConfigSchema.parse({ database: { port: SECURE_PORTS.postgres }, router: { consumer: 'outbox-router' } });
  const { plan } = planKafkaAcls(config);
  return withSecureAdmin(certs, (admin) => applyKafkaAcls(admin, plan));
}

export async function upSecureStack(config: StackConfig, onStep: (event: StepEvent) => void): Promise<{ totalMs: number; paths: StackPaths }> {
  const paths = secureStackPaths(config);
  const { step, sinceLast, total } = stepTimer(onStep);
  const rt: Runtime = {
    java: findJava('Kafka and Kafka Connect', 17, config.javaHome, 'JAVA_HOME'),
    registryJava: findJava('Apicurio Registry 3.3', 21, config.registryJavaHome, 'OUTBOX_REGISTRY_JAVA_HOME'),
  };
  const fetched = ensureJars(paths, (name) => onStep({ step: 'download', ms: sinceLast(), detail: `fetching ${name} from Maven Central…` }));
  step('jars', fetched.length ? `downloaded ${fetched.join(', ')}` : `cached in ${paths.cacheDir}`);
  const nginx = ensureNginx();
  for (const dir of [paths.configDir, paths.logDir, paths.pidDir, join(paths.stateDir, 'nginx')]) mkdirSync(dir, { recursive: true });
  const { certs, created } = ensureCerts(join(paths.stateDir, 'tls'), join(rt.java.home, 'bin', 'keytool'));
  step('tls', `${created ? 'made' : 'kept'} the private CA and a certificate per service in ${certs.dir} (clients trust ${certs.caCert})`);
  step('postgres', await upPostgres(config, paths, certs));

  writeFileSync(file(paths, 'kafka.properties'), secureKafkaProperties(certs, join(paths.stateDir, 'kafka-data')));
  writeFileSync(file(paths, 'admin-client.properties'), adminClientProperties(certs), { mode: 0o600 });
  formatKafka(paths, rt.java, file(paths, 'kafka.properties'));
  const kafka = await start(paths, 'kafka', rt.java.bin, [marker(paths), '-Xms256m', `-Xmx${config.heap.kafka}`, '-XX:+UseParallelGC', '-XX:-UsePerfData',
    `-Dlog4j2.configurationFile=${join(paths.connectTemplates, 'log4j2.properties')}`, `-Dkafka.logs.dir=${paths.logDir}`,
    '-cp', join(paths.kafkaLibDir, '*'), 'kafka.Kafka', file(paths, 'kafka.properties')]);
  const registry = await start(paths, 'registry', rt.registryJava.bin, [marker(paths), '-Xms64m', `-Xmx${config.heap.registry}`, '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1',
    `-Dquarkus.http.host=${SECURE_HOST}`, `-Dquarkus.http.port=${SECURE_PORTS.registryBackend}`,
    `-Dquarkus.management.host=${SECURE_HOST}`, `-Dquarkus.management.port=${SECURE_PORTS.registryManagement}`,
    '-Dapicurio.rules.global.compatibility=BACKWARD', '-Dapicurio.storage.kind=sql', '-Dapicurio.storage.sql.kind=postgresql',
    `-Dapicurio.datasource.url=${registryJdbcUrl(certs)}`, `-Dapicurio.datasource.username=${SECURE_POSTGRES.user}`,
    '-jar', join(paths.registryDir, 'quarkus-run.jar')], { ...process.env, APICURIO_DATASOURCE_PASSWORD: SECURE_POSTGRES.password });
  step('kafka', `${await waitReady(config, paths, certs, 'kafka', kafka.pid)}${kafka.started ? '' : ' (already running)'}`);
  step('acls', `${await applyDefaultAcls(certs)} ACL bindings of the default pipeline (User:outbox-connect, -router, -dlq-replay, -relay, -status, -console)`);

  writeFileSync(file(paths, 'registry-htpasswd'), htpasswd(), { mode: 0o644 });
  writeFileSync(file(paths, 'nginx.conf'), nginxConf(certs, paths.stateDir, file(paths, 'registry-htpasswd')));
  const proxy = await start(paths, 'registry-proxy', nginx, ['-c', file(paths, 'nginx.conf'), '-p', paths.stateDir, '-e', logFile(paths, 'registry-proxy')]);

  writeFileSync(file(paths, 'connect.properties'), secureConnectProperties(certs, paths.pluginPath));
  writeFileSync(file(paths, 'connect-jaas.conf'), connectJaas(file(paths, 'connect-users.properties')));
  writeFileSync(file(paths, 'connect-users.properties'), connectUsers(), { mode: 0o600 });
  const connect = await start(paths, 'connect', rt.java.bin, [marker(paths), '-Xms128m', `-Xmx${config.heap.connect}`, '-XX:+UseParallelGC', '-XX:-UsePerfData',
    `-Dlog4j2.configurationFile=${join(paths.connectTemplates, 'log4j2.properties')}`, `-Djava.security.auth.login.config=${file(paths, 'connect-jaas.conf')}`,
    '-cp', `${join(paths.kafkaLibDir, '*')}:${join(paths.connectBasicAuthDir, '*')}`, 'org.apache.kafka.connect.cli.ConnectDistributed', file(paths, 'connect.properties')],
  { ...process.env, OUTBOX_CDC_PASSWORD: process.env.OUTBOX_CDC_PASSWORD || SECURE_POSTGRES.roles.cdc });
  step('registry', `${await waitReady(config, paths, certs, 'registry-proxy', proxy.pid)}${registry.started ? '' : ' (already running)'}`);
  step('connect', `${await waitReady(config, paths, certs, 'connect', connect.pid)}${connect.started ? '' : ' (already running)'}`);
  return { totalMs: total(), paths };
}

export async function downSecureStack(config: StackConfig, clean: boolean, onStep: (event: StepEvent) => void): Promise<void> {
  const paths = secureStackPaths(config);
  for (const name of ['connect', 'registry-proxy', 'registry', 'kafka'] as const) {
    const t = Date.now();
    const pid = servicePid(paths, name);
    if (pid === undefined) continue;
    const outcome = await stopProcess(pid, name === 'kafka' || name === 'connect' ? 20_000 : 5_000);
    removeFile(pidFile(paths, name));
    onStep({ step: name, ms: Date.now() - t, detail: `secure ${name} ${outcome}` });
  }
  const install = pg.findPostgres();
  const layout = existsSync(join(paths.stateDir, 'postgres-root')) ? pg.postgresLayout(paths) : undefined;
  if (install && layout && pg.stopPostgres(install, layout)) onStep({ step: 'postgres', ms: 0, detail: 'secure postgres stopped' });
  if (clean) {
    if (layout && layout.root !== join(paths.stateDir, 'postgres')) rmSync(layout.root, { recursive: true, force: true });
    rmSync(paths.stateDir, { recursive: true, force: true });
    onStep({ step: 'clean', ms: 0, detail: `removed ${paths.stateDir} (its CA and certificates with it)` });
  }
}

export async function secureStackStatus(config: StackConfig): Promise<SecureServiceStatus[]> {
  const paths = secureStackPaths(config);
  const certs = secureCerts(paths);
  return Promise.all(SECURE_SERVICE_NAMES.map(async (name): Promise<SecureServiceStatus> => {
    const pid = existsSync(paths.stateDir) ? servicePid(paths, name) : undefined;
    let ready = false;
    let detail = pid === undefined ? 'not running' : '';
    if (pid !== undefined) {
      try {
        detail = await probe(certs, name)();
        ready = true;
      } catch (error) {
        detail = describeFailure(error);
      }
    }
    return { name, ports: PORTS[name], pid, running: pid !== undefined, ready, detail, rssBytes: pid ? treeRssBytes(pid) : 0, logFile: logFile(paths, name) };
  }));
}
