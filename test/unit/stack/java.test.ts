/** scripts/stack/java.ts: reading a JDK's version from its home, with fake JDK folders in a temp dir. */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OutboxError, isOutboxError } from '../../../src/errors';
import { findJava } from '../../../scripts/stack/java';

let root: string;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'outbox-java-'));
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

/** A folder that looks like a JDK home: `release` (when given) and an executable bin/java. */
function fakeJdk(name: string, javaVersion: string | undefined, versionOutput = 'echo "java -version was run" >&2'): string {
  const home = join(root, name);
  mkdirSync(join(home, 'bin'), { recursive: true });
  if (javaVersion !== undefined) writeFileSync(join(home, 'release'), `IMPLEMENTOR="Test"\nJAVA_VERSION="${javaVersion}"\nOS_NAME="Linux"\n`);
  writeFileSync(join(home, 'bin', 'java'), `#!/bin/sh\n${versionOutput}\nexit 0\n`);
  chmodSync(join(home, 'bin', 'java'), 0o755);
  return home;
}

function javaError(fn: () => unknown): OutboxError {
  try {
    fn();
  } catch (error) {
    if (isOutboxError(error)) return error;
    throw error;
  }
  throw new Error('expected findJava to throw');
}

describe('findJava with an explicit home', () => {
  it('throws STACK_JAVA_MISSING naming the variable and the path when the home does not exist', () => {
    const missing = join(root, 'no-such-jdk');
    const error = javaError(() => findJava('Apicurio Registry 3.3', 21, missing, 'OUTBOX_REGISTRY_JAVA_HOME'));
    expect(error.code).toBe('STACK_JAVA_MISSING');
    expect(error.message).toContain(`OUTBOX_REGISTRY_JAVA_HOME=${missing}`);
    expect(error.message).toContain('Apicurio Registry 3.3');
    expect(error.message).toContain('21');
  });

  it('throws when the home has no bin/java', () => {
    const home = join(root, 'empty-home');
    mkdirSync(home, { recursive: true });
    writeFileSync(join(home, 'release'), 'JAVA_VERSION="21.0.2"\n');
    const error = javaError(() => findJava('Kafka', 17, home, 'JAVA_HOME'));
    expect(error.code).toBe('STACK_JAVA_MISSING');
    expect(error.message).toContain(home);
    expect(error.message).toContain('bin/java');
  });

  it('reads major 21 from a release file with JAVA_VERSION="21.0.2"', () => {
    const home = fakeJdk('jdk-21', '21.0.2');
    const java = findJava('Apicurio Registry 3.3', 21, home, 'OUTBOX_REGISTRY_JAVA_HOME');
    expect(java).toEqual({ home, bin: join(home, 'bin', 'java'), major: 21, version: '21.0.2' });
  });

  it('accepts a newer JDK than required', () => {
    expect(findJava('Kafka', 17, fakeJdk('jdk-21b', '21.0.2'), 'JAVA_HOME').major).toBe(21);
  });

  it('throws naming the version found when the JDK is older than asked', () => {
    const home = fakeJdk('jdk-21c', '21.0.2');
    const error = javaError(() => findJava('Future thing', 25, home, 'JAVA_HOME'));
    expect(error.code).toBe('STACK_JAVA_MISSING');
    expect(error.message).toContain('Java 21.0.2');
    expect(error.message).toContain('25');
    expect(error.message).toContain(`JAVA_HOME=${home}`);
  });

  it('names a generic setting when no variable name is given', () => {
    expect(javaError(() => findJava('Kafka', 17, join(root, 'nowhere'))).message).toContain('the configured Java home');
  });

  it('parses the legacy "1.8.0_392" as major 8', () => {
    const home = fakeJdk('jdk-8', '1.8.0_392');
    expect(findJava('Old', 8, home).major).toBe(8);
    const error = javaError(() => findJava('Kafka', 17, home, 'JAVA_HOME'));
    expect(error.message).toContain('1.8.0_392');
  });

  it('parses a bare major such as "17"', () => {
    expect(findJava('Kafka', 17, fakeJdk('jdk-17', '17')).major).toBe(17);
  });

  it('falls back to `java -version` when the home has no release file', () => {
    const home = fakeJdk('jdk-norelease', undefined, 'echo \'openjdk version "17.0.15" 2025-04-15\' >&2');
    const java = findJava('Kafka', 17, home, 'JAVA_HOME');
    expect(java.major).toBe(17);
    expect(java.version).toBe('17.0.15');
  });

  it('treats a home whose version cannot be read as missing', () => {
    const home = fakeJdk('jdk-garbage', undefined, 'echo "no idea" >&2');
    const error = javaError(() => findJava('Kafka', 17, home, 'JAVA_HOME'));
    expect(error.code).toBe('STACK_JAVA_MISSING');
    expect(error.message).toContain(`JAVA_HOME=${home}`);
  });
});
