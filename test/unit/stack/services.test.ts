/** scripts/stack/services.ts: the JVM command lines of the native stack (flags for a 2-core machine). */
import { resolveStackConfig } from '../../../scripts/stack/config';
import type { JavaRuntime } from '../../../scripts/stack/java';
import { stackPaths } from '../../../scripts/stack/paths';
import { allJvmSlots, JVM_FLAGS, jvmServices, mainNeedle, type JvmServiceName } from '../../../scripts/stack/services';

const java: JavaRuntime = { home: '/jdk17', bin: '/jdk17/bin/java', major: 17, version: '17.0.15' };
const registryJava: JavaRuntime = { home: '/jdk21', bin: '/jdk21/bin/java', major: 21, version: '21.0.7' };
const config = resolveStackConfig({ stateDir: '/tmp/outbox-services-test/state', cacheDir: '/tmp/outbox-services-test/cache' });
const services = jvmServices(config, stackPaths(config.stateDir, config.cacheDir), java, registryJava);
const args = (name: JvmServiceName): string[] => services.find((s) => s.name === name)?.args ?? [];

describe('jvmServices', () => {
  it.each(['kafka', 'connect', 'registry'] as const)('%s runs with its JVM_FLAGS, before the main class or jar', (name) => {
    const line = args(name);
    const main = line.findIndex((a) => a === '-cp' || a === '-jar');
    expect(main).toBeGreaterThan(0);
    for (const flag of JVM_FLAGS[name]) expect(line.slice(0, main)).toContain(flag);
  });

  it('Kafka and Connect use ParallelGC, not G1; exactly one collector per JVM', () => {
    for (const name of ['kafka', 'connect'] as const) {
      expect(args(name)).toContain('-XX:+UseParallelGC');
      expect(args(name).filter((a) => /^-XX:\+Use\w+GC$/.test(a))).toHaveLength(1);
      expect(args(name).join(' ')).not.toContain('G1');
    }
  });

  it('the registry, off the hot path, runs SerialGC and C1 only', () => {
    expect(args('registry')).toEqual(expect.arrayContaining(['-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1']));
  });

  it('keeps the configured heaps and exits on OutOfMemoryError', () => {
    expect(args('kafka')).toContain(`-Xmx${config.heap.kafka}`);
    expect(args('connect')).toContain(`-Xmx${config.heap.connect}`);
    expect(args('registry')).toContain(`-Xmx${config.heap.registry}`);
    for (const name of ['kafka', 'connect', 'registry'] as const) expect(args(name)).toContain('-XX:+ExitOnOutOfMemoryError');
  });

  it('Kafka and Connect log every collection and its pause to <logDir>/<name>-gc.log, rotated', () => {
    const logDir = stackPaths(config.stateDir, config.cacheDir).logDir;
    for (const name of ['kafka', 'connect'] as const) {
      const flag = args(name).find((a) => a.startsWith('-Xlog:gc'));
      expect(flag).toBe(`-Xlog:gc:file=${logDir}/${name}-gc.log:time,uptimemillis:filecount=2,filesize=10m`);
    }
  });
});

describe('jvmServices on the cluster profile', () => {
  const paths = stackPaths(config.stateDir, config.cacheDir);
  const cluster = jvmServices(config, paths, java, registryJava, 'cluster');
  const named = (name: JvmServiceName) => cluster.find((s) => s.name === name);

  it('runs three brokers, the registry and two workers, brokers first', () => {
    expect(cluster.map((s) => [s.name, s.group, s.ports])).toEqual([
      ['kafka-1', 'kafka', [9092, 9093]],
      ['kafka-2', 'kafka', [9192, 9193]],
      ['kafka-3', 'kafka', [9292, 9293]],
      ['registry', 'registry', [8081, 9001]],
      ['connect-1', 'connect', [8083]],
      ['connect-2', 'connect', [8084]],
    ]);
  });

  it('gives each node its own properties file, log, pid file and data folder, and the cluster heaps', () => {
    for (const name of ['kafka-1', 'kafka-2', 'kafka-3', 'connect-1', 'connect-2'] as const) {
      const service = named(name);
      expect(service?.args.at(-1)).toBe(`${paths.configDir}/${name}.properties`);
      expect(service?.logFile).toBe(`${paths.logDir}/${name}.log`);
      expect(service?.pidFile).toBe(`${paths.pidDir}/${name}.pid`);
      expect(service?.args).toContain(`-Xmx${name.startsWith('kafka') ? config.heap.clusterKafka : config.heap.clusterConnect}`);
      for (const flag of JVM_FLAGS[service?.group === 'kafka' ? 'kafka' : 'connect']) expect(service?.args).toContain(flag);
    }
    expect(new Set(cluster.filter((s) => s.group === 'kafka').map((s) => s.dataDir)).size).toBe(3);
  });

  it('hands both workers the CDC password for ${env:OUTBOX_CDC_PASSWORD}', () => {
    for (const name of ['connect-1', 'connect-2'] as const) expect(named(name)?.env?.OUTBOX_CDC_PASSWORD).toBeTruthy();
  });

  it('tells every JVM of either profile apart by its command line (main class and properties file)', () => {
    const needles = allJvmSlots(paths).map(mainNeedle);
    expect(new Set(needles).size).toBe(needles.length);
    expect(needles.filter((n) => n.startsWith('kafka.Kafka '))).toHaveLength(4);
    // The single broker's needle must not match a cluster broker's command line, nor the other way round.
    const lines = cluster.filter((s) => s.group === 'kafka').map((s) => s.args.join(' '));
    const singleKafka = allJvmSlots(paths).find((s) => s.name === 'kafka');
    for (const line of lines) expect(line.includes(mainNeedle(singleKafka ?? { name: 'kafka', group: 'kafka', ports: [] }))).toBe(false);
  });
});
