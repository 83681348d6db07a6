import { join } from 'node:path';
import type { StackConfig } from './config';
import type { JavaRuntime } from './java';
import type { StackPaths } from './paths';
import { probeConnect, probeKafka, probeRegistry, type Probe } from './probes';
import { LOCAL_ROLE_PASSWORDS, STACK_HOST, STACK_PORTS } from './settings';

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

const G1 = ['-XX:+UseG1GC', '-XX:MaxGCPauseMillis=20', '-XX:+ExitOnOutOfMemoryError', '-Djava.awt.headless=true'];

export function jvmServices(config: StackConfig, paths: StackPaths, java: JavaRuntime, registryJava: JavaRuntime): JvmService[] {
  const marker = stackMarker(paths);
  const log4j = `-Dlog4j2.configurationFile=${join(paths.configDir, 'log4j2.properties')}`;
  const file = (name: string) => ({ logFile: join(paths.logDir, `${name}.log`), pidFile: join(paths.pidDir, `${name}.pid`) });
  return [
    {
      name: 'kafka',
      title: 'Kafka (KRaft)',
      ports: [STACK_PORTS.kafka, STACK_PORTS.kafkaController],
      java,
      args: [marker, '-Xms256m', `-Xmx${config.heap.kafka}`, ...G1, log4j, `-Dkafka.logs.dir=${paths.logDir}`,
        '-cp', join(paths.kafkaLibDir, '*'), 'kafka.Kafka', join(paths.configDir, 'kafka-server.properties')],
      probe: probeKafka,
      ...file('kafka'),
    },
    {
      name: 'registry',
      title: 'Apicurio Registry',
      ports: [STACK_PORTS.registry, STACK_PORTS.registryManagement],
      java: registryJava,
      args: [marker, '-Xms64m', `-Xmx${config.heap.registry}`, '-XX:+ExitOnOutOfMemoryError',
        `-Dquarkus.http.host=${STACK_HOST}`, `-Dquarkus.http.port=${STACK_PORTS.registry}`,
        `-Dquarkus.management.host=${STACK_HOST}`, `-Dquarkus.management.port=${STACK_PORTS.registryManagement}`,
        '-Dapicurio.rules.global.compatibility=BACKWARD',
        '-jar', join(paths.registryDir, 'quarkus-run.jar')],
      probe: probeRegistry,
      ...file('registry'),
    },
    {
      name: 'connect',
      title: 'Kafka Connect + Debezium',
      ports: [STACK_PORTS.connect],
      java,
      args: [marker, '-Xms128m', `-Xmx${config.heap.connect}`, ...G1, log4j,
        '-cp', join(paths.kafkaLibDir, '*'), 'org.apache.kafka.connect.cli.ConnectDistributed',
        join(paths.configDir, 'connect-distributed.properties')],
      probe: probeConnect,
      // Resolved by the worker's EnvVarConfigProvider; never stored in a connector config.
      env: { ...process.env, OUTBOX_CDC_PASSWORD: process.env.OUTBOX_CDC_PASSWORD || LOCAL_ROLE_PASSWORDS.cdc },
      ...file('connect'),
    },
  ];
}
