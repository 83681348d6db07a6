import { join } from 'node:path';
import type { StackConfig } from './config';
import type { JavaRuntime } from './java';
import type { StackPaths } from './paths';
import { probeConnect, probeKafka, probeRegistry, type Probe } from './probes';
import { LOCAL_ROLE_PASSWORDS, POSTGRES, REGISTRY_DATABASE, STACK_HOST, STACK_PORTS } from './settings';

export type JvmServiceName = 'kafka' | 'connect' | 'registry';

export interface JvmService {
  name: JvmServiceName;
  title: string;
  ports: number[];
  java: JavaRuntime;
  args: string[];
  logFile: string;
  pidFile: string;
  probe: Probe;
  env?: NodeJS.ProcessEnv;
}

/** Marks our JVMs' command lines, so `down` never kills a process that merely reuses an old pid. */
export function stackMarker(paths: StackPaths): string {
  return `-Doutbox.stack.dir=${paths.stateDir}`;
}

/** A fragment of each service's command line: with the marker, finds our JVM when its pid file is gone. */
export const MAIN_NEEDLES: Readonly<Record<JvmServiceName, string>> = {
  kafka: 'kafka.Kafka ',
  registry: 'quarkus-run.jar',
  connect: 'org.apache.kafka.connect.cli.ConnectDistributed',
};

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

export function jvmServices(config: StackConfig, paths: StackPaths, java: JavaRuntime, registryJava: JavaRuntime): JvmService[] {
  const marker = stackMarker(paths);
  const log4j = `-Dlog4j2.configurationFile=${join(paths.configDir, 'log4j2.properties')}`;
  const file = (name: string) => ({ logFile: join(paths.logDir, `${name}.log`), pidFile: join(paths.pidDir, `${name}.pid`) });
  /** Every collection with its pause, in <logDir>/<name>-gc.log (two files of 10 MB at most): a latency spike can be checked against it. */
  const gcLog = (name: string) => `-Xlog:gc:file=${join(paths.logDir, `${name}-gc.log`)}:time,uptimemillis:filecount=2,filesize=10m`;
  return [
    {
      name: 'kafka',
      title: 'Kafka (KRaft)',
      ports: [STACK_PORTS.kafka, STACK_PORTS.kafkaController],
      java,
      args: [marker, '-Xms256m', `-Xmx${config.heap.kafka}`, ...JVM_FLAGS.kafka, gcLog('kafka'), log4j, `-Dkafka.logs.dir=${paths.logDir}`,
        '-cp', join(paths.kafkaLibDir, '*'), 'kafka.Kafka', join(paths.configDir, 'kafka-server.properties')],
      probe: probeKafka,
      ...file('kafka'),
    },
    {
      name: 'registry',
      title: 'Apicurio Registry',
      ports: [STACK_PORTS.registry, STACK_PORTS.registryManagement],
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
      ...file('registry'),
    },
    {
      name: 'connect',
      title: 'Kafka Connect + Debezium',
      ports: [STACK_PORTS.connect],
      java,
      args: [marker, '-Xms128m', `-Xmx${config.heap.connect}`, ...JVM_FLAGS.connect, gcLog('connect'), log4j,
        '-cp', join(paths.kafkaLibDir, '*'), 'org.apache.kafka.connect.cli.ConnectDistributed',
        join(paths.configDir, 'connect-distributed.properties')],
      probe: probeConnect,
      // Resolved by the worker's EnvVarConfigProvider; never stored in a connector config.
      env: { ...process.env, OUTBOX_CDC_PASSWORD: process.env.OUTBOX_CDC_PASSWORD || LOCAL_ROLE_PASSWORDS.cdc },
      ...file('connect'),
    },
  ];
}
