/** scripts/stack/paths.ts: where state and the version-keyed jar cache live. */
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { PROJECT_ROOT, stackPaths } from '../../../scripts/stack/paths';
import { STACK_VERSIONS } from '../../../scripts/stack/settings';

describe('stackPaths', () => {
  const paths = stackPaths('/srv/state', '/srv/cache');

  it('keeps per-checkout folders under the state folder', () => {
    expect(paths.stateDir).toBe('/srv/state');
    for (const key of ['configDir', 'logDir', 'pidDir', 'kafkaDataDir'] as const) {
      expect(dirname(paths[key])).toBe('/srv/state');
    }
    expect(new Set([paths.configDir, paths.logDir, paths.pidDir, paths.kafkaDataDir]).size).toBe(4);
  });

  it('keys the cache folders by version', () => {
    expect(paths.cacheDir).toBe('/srv/cache');
    for (const key of ['kafkaLibDir', 'pluginPath', 'registryDir'] as const) expect(dirname(paths[key])).toBe('/srv/cache');
    expect(basename(paths.kafkaLibDir)).toContain(STACK_VERSIONS.kafka);
    expect(basename(paths.registryDir)).toContain(STACK_VERSIONS.apicurio);
    expect(basename(paths.pluginPath)).toContain(STACK_VERSIONS.debezium);
  });

  it('puts the Debezium plugin directly under plugin.path and the Kafka jars outside it', () => {
    expect(dirname(paths.debeziumPluginDir)).toBe(paths.pluginPath);
    expect(paths.kafkaLibDir.startsWith(`${paths.pluginPath}/`)).toBe(false);
    expect(paths.registryDir.startsWith(`${paths.pluginPath}/`)).toBe(false);
  });

  it('resolves relative folders to absolute ones (plugin.path and log.dirs must be absolute)', () => {
    const rel = stackPaths('rel-state', join('..', 'rel-cache'));
    expect(rel.stateDir).toBe(resolve(process.cwd(), 'rel-state'));
    expect(rel.cacheDir).toBe(resolve(process.cwd(), '..', 'rel-cache'));
    for (const value of Object.values(rel)) expect(isAbsolute(value)).toBe(true);
    expect(rel.pluginPath.startsWith(`${resolve(process.cwd(), '..', 'rel-cache')}/`)).toBe(true);
  });

  it('normalizes trailing slashes and dot segments', () => {
    expect(stackPaths('/srv/./state/', '/srv/x/../cache/').kafkaLibDir).toBe(paths.kafkaLibDir);
  });

  it('finds the templates in the repository connect/ folder', () => {
    expect(paths.connectTemplates).toBe(join(PROJECT_ROOT, 'connect'));
    expect(PROJECT_ROOT).toBe(resolve(__dirname, '..', '..', '..'));
  });

  it('is frozen', () => {
    expect(Object.isFrozen(paths)).toBe(true);
  });
});
