import { existsSync, readFileSync, readdirSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { OutboxError } from 'outbox-router/errors';
import { run, which } from './processes';

export interface JavaRuntime {
  home: string;
  bin: string;
  major: number;
  version: string;
}

function fromHome(home: string): JavaRuntime | undefined {
  const bin = join(home, 'bin', 'java');
  if (!existsSync(bin)) return undefined;
  let version = '';
  const release = join(home, 'release');
  if (existsSync(release)) {
    version = /JAVA_VERSION="([^"]+)"/.exec(readFileSync(release, 'utf8'))?.[1] ?? '';
  }
  if (!version) {
    // `java -version` prints e.g. `openjdk version "17.0.15" 2025-04-15` on stderr.
    version = /version "([^"]+)"/.exec(run(bin, ['-version']).output)?.[1] ?? '';
  }
  const major = Number.parseInt(version.startsWith('1.') ? version.split('.')[1] ?? '' : version, 10);
  return Number.isInteger(major) ? { home, bin, major, version } : undefined;
}

/** Every JDK we can see: $JAVA_HOME, `java` on PATH, then /usr/lib/jvm/*, without duplicates. */
export function listJavaRuntimes(): JavaRuntime[] {
  const homes: string[] = [];
  if (process.env.JAVA_HOME) homes.push(process.env.JAVA_HOME);
  const onPath = which('java');
  if (onPath) homes.push(dirname(dirname(realpathSync(onPath))));
  if (existsSync('/usr/lib/jvm')) {
    for (const entry of readdirSync('/usr/lib/jvm').sort()) homes.push(join('/usr/lib/jvm', entry));
  }
  const seen = new Set<string>();
  const runtimes: JavaRuntime[] = [];
  for (const home of homes) {
    let real: string;
    try {
      real = realpathSync(home);
    } catch {
      continue;
    }
    if (seen.has(real)) continue;
    seen.add(real);
    const runtime = fromHome(real);
    if (runtime) runtimes.push(runtime);
  }
  return runtimes;
}

/**
 * The JDK for a component: `explicitHome` if given (it must satisfy `minMajor`), else the first
 * runtime in `listJavaRuntimes()` order that does: $JAVA_HOME and the default java win over others.
 */
export function findJava(component: string, minMajor: number, explicitHome?: string, envName?: string): JavaRuntime {
  if (explicitHome) {
    const runtime = fromHome(explicitHome);
    if (!runtime || runtime.major < minMajor) {
      throw new OutboxError(
        'STACK_JAVA_MISSING',
        `${component}: needs Java ${minMajor} or newer, but ${envName ?? 'the configured Java home'}=${explicitHome} ` +
          `${runtime ? `is Java ${runtime.version}` : 'has no bin/java'}. Point it at a JDK ${minMajor}+ (ls /usr/lib/jvm).`,
      );
    }
    return runtime;
  }
  const runtimes = listJavaRuntimes();
  const match = runtimes.find((r) => r.major >= minMajor);
  if (!match) {
    const found = runtimes.map((r) => `${r.home} (${r.version})`).join(', ') || 'none';
    throw new OutboxError(
      'STACK_JAVA_MISSING',
      `${component}: needs Java ${minMajor} or newer; found: ${found}. Install one ` +
        `(a Temurin or OpenJDK ${minMajor}+ under /usr/lib/jvm; Debian 12 packages only OpenJDK 17)` +
        `${envName ? ` and/or set ${envName} to its home` : ''}.`,
    );
  }
  return match;
}
