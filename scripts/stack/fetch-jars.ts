import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { OutboxError } from 'outbox-router/errors';
import type { StackPaths } from './paths';
import { run, which } from './processes';
import { STACK_VERSIONS } from './settings';

const COMPLETE = '.complete';
export const DEPENDENCY_PLUGIN = 'org.apache.maven.plugins:maven-dependency-plugin:3.8.1';

export interface JarSet {
  name: string;
  dir: string;
  fetch(tmpDir: string, mvn: string): void;
}

/**
 * The things the native stack downloads from Maven Central, each into its own version-keyed
 * folder of the cache. A folder counts only once its `.complete` marker exists, so an interrupted
 * download is redone instead of half-used.
 */
export function jarSets(paths: StackPaths): JarSet[] {
  const versionProps = [
    `-Dkafka.version=${STACK_VERSIONS.kafka}`,
    `-Dlog4j.version=${STACK_VERSIONS.log4j}`,
    `-Dslf4j.version=${STACK_VERSIONS.slf4j}`,
    `-Ddebezium.version=${STACK_VERSIONS.debezium}`,
  ];
  const copyDependencies = (pom: string) => (tmp: string, mvn: string) =>
    maven(mvn, ['-f', join(paths.connectTemplates, 'maven', pom, 'pom.xml'), ...versionProps,
      'dependency:copy-dependencies', '-DincludeScope=runtime', `-DoutputDirectory=${tmp}`], pom);
  return [
    { name: `Kafka ${STACK_VERSIONS.kafka} (broker + Connect)`, dir: paths.kafkaLibDir, fetch: copyDependencies('kafka-runtime') },
    { name: `Debezium PostgreSQL connector ${STACK_VERSIONS.debezium}`, dir: paths.debeziumPluginDir, fetch: copyDependencies('debezium-plugin') },
    {
      // The secure profile's Connect REST basic auth (BasicAuthSecurityRestExtension): one jar, not in connect-runtime.
      name: `Kafka Connect basic-auth REST extension ${STACK_VERSIONS.kafka}`,
      dir: paths.connectBasicAuthDir,
      fetch: (tmp, mvn) => maven(mvn, [`${DEPENDENCY_PLUGIN}:copy`, `-Dartifact=org.apache.kafka:connect-basic-auth-extension:${STACK_VERSIONS.kafka}`, `-DoutputDirectory=${tmp}`], 'connect-basic-auth-extension', tmp),
    },
    {
      name: `Apicurio Registry ${STACK_VERSIONS.apicurio}`,
      dir: paths.registryDir,
      fetch: (tmp, mvn) => {
        // The runnable Quarkus app is the `all` tarball attached to the app artifact; fetched alone,
        // because resolving the app's own dependencies fails (some are not on Maven Central).
        const artifact = `io.apicurio:apicurio-registry-app:${STACK_VERSIONS.apicurio}:tar.gz:all`;
        const download = join(tmp, '.download');
        // Fully qualified and run from the empty temp folder: no project pom around, the same pinned plugin as the poms.
        maven(mvn, [`${DEPENDENCY_PLUGIN}:copy`, `-Dartifact=${artifact}`, `-DoutputDirectory=${download}`], artifact, tmp);
        const tarball = readdirSync(download).find((f) => f.endsWith('.tar.gz'));
        if (!tarball) throw downloadError(artifact, 'Maven finished but left no .tar.gz');
        const untar = run('tar', ['-xzf', join(download, tarball), '-C', tmp]);
        if (untar.status !== 0) {
          throw new OutboxError('STACK_DOWNLOAD_FAILED', `Unpacking ${tarball} with tar failed (is tar installed? \`apt-get install -y tar\`): ${untar.output.trim()}`);
        }
        rmSync(download, { recursive: true, force: true });
        if (!existsSync(join(tmp, 'quarkus-run.jar'))) throw downloadError(artifact, 'the tarball has no quarkus-run.jar');
      },
    },
  ];
}

export function missingJarSets(paths: StackPaths): JarSet[] {
  return jarSets(paths).filter((set) => !existsSync(join(set.dir, COMPLETE)));
}

/** Downloads what the cache lacks; returns the names fetched (empty when everything was cached). */
export function ensureJars(paths: StackPaths, onFetch: (name: string) => void = () => {}): string[] {
  const missing = missingJarSets(paths);
  if (missing.length === 0) return [];
  const mvn = which('mvn');
  if (!mvn) {
    throw new OutboxError(
      'STACK_MAVEN_MISSING',
      `Maven (mvn) is not on PATH, and the jar cache ${paths.cacheDir} lacks: ${missing.map((m) => m.name).join(', ')}. ` +
        'Install it with `apt-get install -y maven` (Maven Central must be reachable), or point OUTBOX_CACHE_DIR at a filled cache.',
    );
  }
  for (const set of missing) {
    onFetch(set.name);
    const tmp = `${set.dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    try {
      set.fetch(tmp, mvn);
      writeFileSync(join(tmp, COMPLETE), `${new Date().toISOString()}\n`);
      rmSync(set.dir, { recursive: true, force: true });
      mkdirSync(dirname(set.dir), { recursive: true });
      renameSync(tmp, set.dir);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }
  return missing.map((m) => m.name);
}

export function maven(mvn: string, args: string[], what: string, cwd?: string): void {
  const result = run(mvn, ['-B', '-q', '-ntp', ...args], { cwd });
  if (result.status !== 0) throw downloadError(what, result.output);
}

function downloadError(what: string, output: string): OutboxError {
  const tail = output.trim().split('\n').slice(-12).join('\n');
  return new OutboxError(
    'STACK_DOWNLOAD_FAILED',
    `Downloading ${what} from Maven Central failed. Check that Maven Central is reachable (proxy settings in ` +
      `~/.m2/settings.xml) and retry \`npm run stack:up\`; Maven said:\n${tail}`,
    { retriable: true, details: { artifact: what } },
  );
}
