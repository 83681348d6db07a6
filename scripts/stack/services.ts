import { join } from 'node:path';
import type { StackConfig } from './config';
import type { JavaRuntime } from './java';
import { kafkaNodeDataDir, type StackPaths } from './paths';
import { connectProbe, kafkaNodeProbe, probeConnect, probeKafka, probeRegistry, type Probe } from './probes';
import { CLUSTER, LOCAL_ROLE_PASSWORDS, POSTGRES, REGISTRY_DATABASE, STACK_HOST, STACK_PORTS, type ConnectWorkerName, type KafkaNodeName, type StackProfile } from './settings';

export type ServiceGroup = 'kafka' | 'registry' | 'connect';
/** `kafka` and `connect` are the single profile's JVMs; kafka-1…3 and connect-1…2 the cluster profile's. */
export type JvmServiceName = 'kafka' | 'registry' | 'connect' | KafkaNodeName | ConnectWorkerName;
/** The cluster profile's PostgreSQL nodes (cluster-postgres.ts); `postgres` is its proxy there. */
export type ClusterPostgresName = 'postgres-a' | 'postgres-b';
export type ServiceName = 'postgres' | ClusterPostgresName | JvmServiceName;

/** One row of `stack status`. */
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

/** Where one JVM of a profile runs: what `down` and `status` need, without a JDK. */
export interface JvmSlot {
  name: JvmServiceName;
  group: ServiceGroup;
  ports: number[];
  /** Its rendered properties file in configDir (Kafka and Connect), which also tells our JVMs apart. */
  configFile?: string;
}

export interface JvmService extends JvmSlot {
  title: string;
  java: JavaRuntime;
  args: string[];
  logFile: string;
  pidFile: string;
  probe: Probe;
  env?: NodeJS.ProcessEnv;
  /** Kafka only: the log.dirs that `stack up` formats before the first start. */
  dataDir?: string;
}

/** The JVMs of a profile, in start order: brokers, the registry, then the Connect workers. */
export function jvmLayout(profile: StackProfile, paths: Pick<StackPaths, 'configDir'>): JvmSlot[] {
  const file = (name: string) => join(paths.configDir, `${name}.properties`);
  if (profile === 'single') {
    return [
      { name: 'kafka', group: 'kafka', ports: [STACK_PORTS.kafka, STACK_PORTS.kafkaController], configFile: file('kafka-server') },
      { name: 'registry', group: 'registry', ports: [STACK_PORTS.registry, STACK_PORTS.registryManagement] },
      { name: 'connect', group: 'connect', ports: [STACK_PORTS.connect], configFile: file('connect-distributed') },
    ];
  }
  return [
    ...CLUSTER.kafkaNodes.map((n): JvmSlot => ({ name: n.name, group: 'kafka', ports: [n.port, n.controllerPort], configFile: file(n.name) })),
    { name: 'registry', group: 'registry', ports: [STACK_PORTS.registry, STACK_PORTS.registryManagement] },
    ...CLUSTER.connectWorkers.map((w): JvmSlot => ({ name: w.name, group: 'connect', ports: [w.port], configFile: file(w.name) })),
  ];
}

/** Every JVM either profile runs, each once: `down` stops them all, whichever profile is recorded. */
export function allJvmSlots(paths: Pick<StackPaths, 'configDir'>): JvmSlot[] {
  const cluster = jvmLayout('cluster', paths);
  return [...jvmLayout('single', paths), ...cluster.filter((s) => s.name !== 'registry')];
}

/** Marks our JVMs' command lines, so `down` never kills a process that merely reuses an old pid. */
export function stackMarker(paths: StackPaths): string {
  return `-Doutbox.stack.dir=${paths.stateDir}`;
}

/**
 * A fragment of a JVM's command line: with the marker, finds our JVM when its pid file is gone. The main
 * class and its properties file, since the three brokers (and the two workers) share their main class.
 */
export function mainNeedle(slot: JvmSlot): string {
  if (slot.group === 'registry') return 'quarkus-run.jar';
  const main = slot.group === 'kafka' ? 'kafka.Kafka' : 'org.apache.kafka.connect.cli.ConnectDistributed';
  return `${main} ${slot.configFile}`;
}

/**
 * JVM flags for a 2-core machine that PostgreSQL, the router and the writer share with the three JVMs.
 * - ParallelGC instead of G1 for Kafka and Connect: no concurrent refinement or marking threads and
 *   cheaper write barriers, so less CPU per event; their young collections (mostly garbage, a heap of
 *   768 MiB at most) pause for a few ms, far below the latency budget.
 * - The registry is off the hot path (the router and writer cache schemas): SerialGC and
 *   C1 only (TieredStopAtLevel=1), so its JIT never competes with the hot path for a core.
 * - -XX:-UsePerfData: no hsperfdata file updated on every safepoint (jstat is not used here).
 * Measured on the local stack (docs/local-stack.md, "JVM and PostgreSQL tuning"). The same flags are in
 * docker-compose.yml; test/unit/docker-compose.test.ts checks that.
 */
export const JVM_FLAGS = Object.freeze({
  kafka: ['-XX:+UseParallelGC', '-XX:-UsePerfData', '-XX:+ExitOnOutOfMemoryError', '-Djava.awt.headless=true'],
  connect: ['-XX:+UseParallelGC', '-XX:-UsePerfData', '-XX:+ExitOnOutOfMemoryError', '-Djava.awt.headless=true'],
  registry: ['-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', '-XX:-UsePerfData', '-XX:+ExitOnOutOfMemoryError'],
});

export function jvmServices(config: StackConfig, paths: StackPaths, java: JavaRuntime, registryJava: JavaRuntime, profile: StackProfile = 'single'): JvmService[] {
  const marker = stackMarker(paths);
  const log4j = `-Dlog4j2.configurationFile=${join(paths.configDir, 'log4j2.properties')}`;
  const file = (name: string) => ({ logFile: join(paths.logDir, `${name}.log`), pidFile: join(paths.pidDir, `${name}.pid`) });
  /** Every collection with its pause, in <logDir>/<name>-gc.log (two files of 10 MB at most): a latency spike can be checked against it. */
  const gcLog = (name: string) => `-Xlog:gc:file=${join(paths.logDir, `${name}-gc.log`)}:time,uptimemillis:filecount=2,filesize=10m`;
  const heap = profile === 'single' ? { kafka: config.heap.kafka, connect: config.heap.connect } : { kafka: config.heap.clusterKafka, connect: config.heap.clusterConnect };
  return jvmLayout(profile, paths).map((slot): JvmService => {
    const properties = slot.configFile ?? '';
    if (slot.group === 'kafka') {
      const node = CLUSTER.kafkaNodes.find((n) => n.name === slot.name);
      return {
        ...slot,
        title: node ? `Kafka node ${node.nodeId} (KRaft broker+controller)` : 'Kafka (KRaft)',
        java,
        args: [marker, '-Xms256m', `-Xmx${heap.kafka}`, ...JVM_FLAGS.kafka, gcLog(slot.name), log4j, `-Dkafka.logs.dir=${paths.logDir}`,
          '-cp', join(paths.kafkaLibDir, '*'), 'kafka.Kafka', properties],
        probe: node ? kafkaNodeProbe(node, CLUSTER.kafkaNodes.length) : probeKafka,
        dataDir: node ? kafkaNodeDataDir(paths, node.name) : paths.kafkaDataDir,
        ...file(slot.name),
      };
    }
    if (slot.group === 'connect') {
      const worker = CLUSTER.connectWorkers.find((w) => w.name === slot.name);
      return {
        ...slot,
        title: worker ? `Kafka Connect worker ${worker.name} + Debezium` : 'Kafka Connect + Debezium',
        java,
        args: [marker, '-Xms128m', `-Xmx${heap.connect}`, ...JVM_FLAGS.connect, gcLog(slot.name), log4j,
          '-cp', join(paths.kafkaLibDir, '*'), 'org.apache.kafka.connect.cli.ConnectDistributed', properties],
        probe: worker ? connectProbe(`http://${STACK_HOST}:${worker.port}`) : probeConnect,
        // Resolved by the worker's EnvVarConfigProvider; never stored in a connector config.
        env: { ...process.env, OUTBOX_CDC_PASSWORD: process.env.OUTBOX_CDC_PASSWORD || LOCAL_ROLE_PASSWORDS.cdc },
        ...file(slot.name),
      };
    }
    return {
      ...slot,
      title: 'Apicurio Registry',
      java: registryJava,
      args: [marker, '-Xms64m', `-Xmx${config.heap.registry}`, ...JVM_FLAGS.registry,
        `-Dquarkus.http.host=${STACK_HOST}`, `-Dquarkus.http.port=${STACK_PORTS.registry}`,
        `-Dquarkus.management.host=${STACK_HOST}`, `-Dquarkus.management.port=${STACK_PORTS.registryManagement}`,
        '-Dapicurio.rules.global.compatibility=BACKWARD',
        // SQL storage in the stack's PostgreSQL (REGISTRY_DATABASE): schemas survive a restart.
        '-Dapicurio.storage.kind=sql', '-Dapicurio.storage.sql.kind=postgresql',
        `-Dapicurio.datasource.url=jdbc:postgresql://${STACK_HOST}:${STACK_PORTS.postgres}/${REGISTRY_DATABASE}`,
        `-Dapicurio.datasource.username=${POSTGRES.user}`,
        '-jar', join(paths.registryDir, 'quarkus-run.jar')],
      probe: probeRegistry,
      // The password through the environment (Quarkus reads APICURIO_DATASOURCE_PASSWORD), not the command line.
      env: { ...process.env, APICURIO_DATASOURCE_PASSWORD: POSTGRES.password },
      ...file(slot.name),
    };
  });
}
