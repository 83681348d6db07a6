/**
 * The Maven poms under connect/maven/ must declare the versions of scripts/stack/settings.ts as their
 * defaults (fetch-jars passes them with -D too, but `mvn -f ...` by hand must fetch the same jars),
 * and the Debezium plugin folder must never receive Kafka or SLF4J jars.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { jarSets } from '../../../scripts/stack/fetch-jars';
import { PROJECT_ROOT, stackPaths } from '../../../scripts/stack/paths';
import { STACK_VERSIONS } from '../../../scripts/stack/settings';

const pom = (name: string) => readFileSync(join(PROJECT_ROOT, 'connect', 'maven', name, 'pom.xml'), 'utf8');
const kafkaPom = pom('kafka-runtime');
const debeziumPom = pom('debezium-plugin');

/** The value of `<name>…</name>` inside the pom's <properties>, or undefined. */
function property(xml: string, name: string): string | undefined {
  const props = /<properties>([\s\S]*?)<\/properties>/.exec(xml)?.[1] ?? '';
  const escaped = name.replace(/\./g, '\\.');
  return new RegExp(`<${escaped}>\\s*([^<]*?)\\s*</${escaped}>`).exec(props)?.[1];
}

interface Dependency {
  groupId: string;
  artifactId: string;
  version?: string;
  exclusions: { groupId: string; artifactId: string }[];
}

/** The <dependency> entries of <dependencies> (not <dependencyManagement>). */
function dependencies(xml: string): Dependency[] {
  const withoutManagement = xml.replace(/<dependencyManagement>[\s\S]*?<\/dependencyManagement>/, '');
  const block = /<dependencies>([\s\S]*?)<\/dependencies>/.exec(withoutManagement)?.[1] ?? '';
  return [...block.matchAll(/<dependency>([\s\S]*?)<\/dependency>/g)].map(([, body = '']) => {
    const own = body.replace(/<exclusions>[\s\S]*?<\/exclusions>/, '');
    const tag = (text: string, t: string) => new RegExp(`<${t}>\\s*([^<]*?)\\s*</${t}>`).exec(text)?.[1];
    const exclusions = [...body.matchAll(/<exclusion>([\s\S]*?)<\/exclusion>/g)].map(([, e = '']) => ({
      groupId: tag(e, 'groupId') ?? '',
      artifactId: tag(e, 'artifactId') ?? '',
    }));
    return { groupId: tag(own, 'groupId') ?? '', artifactId: tag(own, 'artifactId') ?? '', version: tag(own, 'version'), exclusions };
  });
}

describe('connect/maven/kafka-runtime/pom.xml', () => {
  it.each([
    ['kafka.version', STACK_VERSIONS.kafka],
    ['log4j.version', STACK_VERSIONS.log4j],
    ['slf4j.version', STACK_VERSIONS.slf4j],
  ])('declares %s = STACK_VERSIONS (%s)', (name, expected) => {
    expect(property(kafkaPom, name)).toBe(expected);
  });

  it('takes the broker and Connect runtime at ${kafka.version}, SLF4J at ${slf4j.version}, Log4j from the BOM at ${log4j.version}', () => {
    const deps = dependencies(kafkaPom);
    const kafka = deps.filter((d) => d.groupId === 'org.apache.kafka');
    expect(kafka.map((d) => d.artifactId).sort()).toEqual(['connect-runtime', 'kafka_2.13']);
    for (const d of kafka) expect(d.version).toBe('${kafka.version}');
    expect(deps.find((d) => d.artifactId === 'slf4j-api')?.version).toBe('${slf4j.version}');
    expect(kafkaPom).toMatch(/<artifactId>log4j-bom<\/artifactId>\s*<version>\$\{log4j\.version\}<\/version>/);
    // Kafka's POMs carry no SLF4J binding: without log4j-slf4j2-impl the broker logs nothing.
    expect(deps.map((d) => d.artifactId)).toEqual(expect.arrayContaining(['log4j-core', 'log4j-slf4j2-impl']));
  });
});

describe('connect/maven/debezium-plugin/pom.xml', () => {
  it('declares debezium.version = STACK_VERSIONS.debezium', () => {
    expect(property(debeziumPom, 'debezium.version')).toBe(STACK_VERSIONS.debezium);
  });

  it('takes the PostgreSQL connector at ${debezium.version}', () => {
    const connector = dependencies(debeziumPom).find((d) => d.artifactId === 'debezium-connector-postgres');
    expect(connector).toBeDefined();
    expect(connector?.groupId).toBe('io.debezium');
    expect(connector?.version).toBe('${debezium.version}');
  });

  it('excludes every org.apache.kafka and org.slf4j artifact from every dependency (the plugin folder must hold no Kafka jars)', () => {
    const deps = dependencies(debeziumPom);
    expect(deps.length).toBeGreaterThan(0);
    for (const dep of deps) {
      expect(dep.groupId).not.toBe('org.apache.kafka');
      expect(dep.groupId).not.toBe('org.slf4j');
      for (const group of ['org.apache.kafka', 'org.slf4j']) {
        expect(dep.exclusions).toContainEqual({ groupId: group, artifactId: '*' });
      }
    }
  });
});

describe('jar cache folders (scripts/stack/fetch-jars.ts)', () => {
  const paths = stackPaths('/tmp/outbox-versions-test/state', '/tmp/outbox-versions-test/cache');
  const sets = jarSets(paths);

  it('downloads into the version-keyed folders of stackPaths', () => {
    expect(sets.map((s) => s.dir)).toEqual([paths.kafkaLibDir, paths.debeziumPluginDir, paths.connectBasicAuthDir, paths.registryDir]);
    expect(sets[0]?.name).toContain(STACK_VERSIONS.kafka);
    expect(sets[1]?.name).toContain(STACK_VERSIONS.debezium);
    expect(sets[2]?.name).toContain(STACK_VERSIONS.kafka);
    expect(sets[3]?.name).toContain(STACK_VERSIONS.apicurio);
  });

  it('never puts the Kafka runtime under plugin.path', () => {
    expect(paths.kafkaLibDir.startsWith(`${paths.pluginPath}/`)).toBe(false);
    expect(paths.debeziumPluginDir.startsWith(`${paths.pluginPath}/`)).toBe(true);
  });
});
