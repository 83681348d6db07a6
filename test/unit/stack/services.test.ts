/** scripts/stack/services.ts: the JVM command lines of the native stack (flags for a 2-core machine). */
import { resolveStackConfig } from '../../../scripts/stack/config';
import type { JavaRuntime } from '../../../scripts/stack/java';
import { stackPaths } from '../../../scripts/stack/paths';
import { JVM_FLAGS, jvmServices, type JvmServiceName } from '../../../scripts/stack/services';

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
