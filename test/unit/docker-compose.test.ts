/**
 * docker-compose.yml must run the same stack as the native one: ports, versions and settings from
 * scripts/stack/settings.ts and connect/*.properties. No Docker needed: the file is only parsed.
 */
import { readFileSync } from 'fs';
import { join } from 'path';
import { parse } from 'yaml';
import { DEFAULT_EXACTLY_ONCE_SOURCE, resolveStackConfig } from '../../scripts/stack/config';
import { stackPaths } from '../../scripts/stack/paths';
import { jvmTemplateValues } from '../../scripts/stack/stack';
import { JVM_FLAGS } from '../../scripts/stack/services';
import { KAFKA, LOCAL_ROLE_PASSWORDS, POSTGRES, STACK_HOST, STACK_PORTS, STACK_VERSIONS } from '../../scripts/stack/settings';

const root = join(__dirname, '..', '..');

interface Service {
  image: string;
  ports?: string[];
  environment?: Record<string, unknown> | string[];
  command?: string | string[];
}

// merge: the outbox services share their settings through YAML merge keys, as Docker Compose reads them.
const compose = parse(readFileSync(join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
};

function service(name: string): Service {
  const s = compose.services[name];
  if (!s) throw new Error(`docker-compose.yml has no service "${name}"`);
  return s;
}

/** A service's environment as strings, whichever of the two Compose forms it uses. */
function env(name: string): Record<string, string> {
  const e = service(name).environment ?? {};
  const pairs = Array.isArray(e)
    ? e.map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)])
    : Object.entries(e).map(([k, v]) => [k, String(v)]);
  return Object.fromEntries(pairs);
}

/** `key=value` lines of a .properties (or postgresql.conf-style `key = value`) file; comments skipped. */
function parseProperties(text: string): Record<string, string> {
  const props: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq > 0) props[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  }
  return props;
}

const readProperties = (file: string) => parseProperties(readFileSync(join(root, 'connect', file), 'utf8'));

/** Settings with a literal value: `${...}` placeholders are host-specific and rendered by `stack up`. */
const literal = (props: Record<string, string>) => Object.entries(props).filter(([, v]) => !v.includes('${'));

describe('docker-compose.yml', () => {
  it.each([
    ['postgres', STACK_PORTS.postgres, 5432],
    ['kafka', STACK_PORTS.kafka, STACK_PORTS.kafka],
    ['connect', STACK_PORTS.connect, 8083],
    ['registry', STACK_PORTS.registry, 8080],
  ])('publishes %s on %s:%i only', (name, hostPort, containerPort) => {
    expect(service(name).ports).toEqual([`${STACK_HOST}:${hostPort}:${containerPort}`]);
  });

  it('publishes nothing beyond 127.0.0.1', () => {
    for (const [name, s] of Object.entries(compose.services)) {
      for (const port of s.ports ?? []) expect(`${name} ${port}`).toMatch(new RegExp(`^${name} 127\\.0\\.0\\.1:`));
    }
  });

  it('pins the images to the versions of settings.ts', () => {
    expect(service('kafka').image).toBe(`apache/kafka:${STACK_VERSIONS.kafka}`);
    expect(service('connect').image).toBe(`quay.io/debezium/connect:${STACK_VERSIONS.debezium}`);
    expect(service('registry').image).toBe(`apicurio/apicurio-registry:${STACK_VERSIONS.apicurio}`);
    const [repo, tag] = service('postgres').image.split(':');
    expect(repo).toBe('postgres');
    expect(Number.parseInt(tag ?? '', 10)).toBeGreaterThanOrEqual(STACK_VERSIONS.postgresMin);
  });

  describe('postgres', () => {
    const command = service('postgres').command ?? [];
    const args = Array.isArray(command) ? command : command.split(/\s+/);
    const settings = Object.fromEntries(
      args.flatMap((arg, i) => (args[i - 1] === '-c' ? [arg.split('=', 2) as [string, string]] : [])),
    );

    it('runs the server with the settings of settings.ts and postgresql.conf', () => {
      expect(args[0]).toBe('postgres');
      expect(settings).toMatchObject({
        wal_level: POSTGRES.walLevel,
        max_replication_slots: String(POSTGRES.maxReplicationSlots),
        max_wal_senders: String(POSTGRES.maxWalSenders),
        max_connections: String(POSTGRES.maxConnections),
        shared_buffers: readProperties('postgresql.conf')['shared_buffers'],
      });
    });

    it('runs with the durability, WAL and checkpoint settings of postgresql.conf', () => {
      const conf = readProperties('postgresql.conf');
      for (const key of ['fsync', 'synchronous_commit', 'wal_buffers', 'max_wal_size', 'checkpoint_timeout']) {
        expect(conf[key]).toBeDefined();
        expect([key, settings[key]]).toEqual([key, conf[key]]);
      }
    });

    it('creates the database and superuser of settings.ts', () => {
      expect(env('postgres')).toMatchObject({
        POSTGRES_DB: POSTGRES.database,
        POSTGRES_USER: POSTGRES.user,
        POSTGRES_PASSWORD: POSTGRES.password,
      });
    });
  });

  describe('kafka', () => {
    const kafka = env('kafka');

    it('uses the fixed cluster id and advertises 127.0.0.1:9092 to the host', () => {
      expect(kafka['CLUSTER_ID']).toBe(KAFKA.clusterId);
      expect(kafka['KAFKA_ADVERTISED_LISTENERS']?.split(',')).toContain(
        `PLAINTEXT_HOST://${STACK_HOST}:${STACK_PORTS.kafka}`,
      );
    });

    it('sets every literal setting of kafka-server.properties', () => {
      const props = readProperties('kafka-server.properties');
      expect(props['offsets.topic.replication.factor']).toBe('1');
      for (const [key, value] of literal(props)) {
        if (key === 'listener.security.protocol.map') continue; // compose adds PLAINTEXT_HOST
        const name = `KAFKA_${key.replace(/_/g, '__').replace(/-/g, '___').replace(/\./g, '_').toUpperCase()}`;
        expect([name, kafka[name]]).toEqual([name, value]);
      }
    });
  });

  describe('connect', () => {
    const connect = env('connect');

    it('joins the group and storage topics of settings.ts through the internal listener', () => {
      expect(connect).toMatchObject({
        GROUP_ID: KAFKA.connectGroupId,
        CONFIG_STORAGE_TOPIC: KAFKA.connectConfigTopic,
        OFFSET_STORAGE_TOPIC: KAFKA.connectOffsetTopic,
        STATUS_STORAGE_TOPIC: KAFKA.connectStatusTopic,
      });
      const advertised = env('kafka')['KAFKA_ADVERTISED_LISTENERS']?.split(',') ?? [];
      expect(advertised).toContain(`PLAINTEXT://${connect['BOOTSTRAP_SERVERS']}`);
    });

    it('sets every literal setting of connect-distributed.properties', () => {
      const props = readProperties('connect-distributed.properties');
      expect(props).toMatchObject({ 'offset.flush.interval.ms': '1000', 'scheduled.rebalance.max.delay.ms': '0' });
      // The image's entrypoint overwrites these CONNECT_* variables from its own plain ones.
      const plain: Record<string, string> = {
        'offset.flush.interval.ms': 'OFFSET_FLUSH_INTERVAL_MS',
        'key.converter': 'KEY_CONVERTER',
        'value.converter': 'VALUE_CONVERTER',
      };
      for (const [key, value] of literal(props)) {
        if (key === 'plugin.discovery') continue; // the image's plugin folder: Kafka's default
        const name = plain[key] ?? `CONNECT_${key.replace(/\./g, '_').toUpperCase()}`;
        expect([name, connect[name]]).toEqual([name, value]);
        if (plain[key]) expect(connect[`CONNECT_${key.replace(/\./g, '_').toUpperCase()}`]).toBeUndefined();
      }
    });
  });

  it('reads exactly.once.source.support from OUTBOX_STACK_EXACTLY_ONCE with the native stack\'s default', () => {
    const props = readProperties('connect-distributed.properties');
    expect(props['exactly.once.source.support']).toBe('${exactlyOnceSource}');
    expect(jvmTemplateValues(stackPaths('/tmp/s', '/tmp/c'))['exactlyOnceSource']).toBe(DEFAULT_EXACTLY_ONCE_SOURCE);
    expect(env('connect')['CONNECT_EXACTLY_ONCE_SOURCE_SUPPORT']).toBe(`\${OUTBOX_STACK_EXACTLY_ONCE:-${DEFAULT_EXACTLY_ONCE_SOURCE}}`);
  });

  describe('JVM flags and heaps of scripts/stack/services.ts', () => {
    const heap = resolveStackConfig().heap;
    const words = (value: string | undefined) => (value ?? '').split(/\s+/);

    it('Kafka: KAFKA_JVM_PERFORMANCE_OPTS and KAFKA_HEAP_OPTS', () => {
      expect(words(env('kafka')['KAFKA_JVM_PERFORMANCE_OPTS'])).toEqual([...JVM_FLAGS.kafka]);
      expect(words(env('kafka')['KAFKA_HEAP_OPTS'])).toContain(`-Xmx${heap.kafka}`);
    });

    it('Connect: KAFKA_JVM_PERFORMANCE_OPTS and HEAP_OPTS', () => {
      expect(words(env('connect')['KAFKA_JVM_PERFORMANCE_OPTS'])).toEqual([...JVM_FLAGS.connect]);
      expect(words(env('connect')['HEAP_OPTS'])).toContain(`-Xmx${heap.connect}`);
    });

    it('registry: JAVA_OPTS_APPEND, still listening on every interface of its container', () => {
      const opts = words(env('registry')['JAVA_OPTS_APPEND']);
      expect(opts).toEqual(expect.arrayContaining([...JVM_FLAGS.registry, `-Xmx${heap.registry}`, '-Dquarkus.http.host=0.0.0.0']));
    });
  });

  it('starts the registry with global compatibility BACKWARD', () => {
    expect(env('registry')['APICURIO_RULES_GLOBAL_COMPATIBILITY']).toBe('BACKWARD');
  });

  it('gives the Connect worker the local CDC password for its env config provider', () => {
    const compose = parse(readFileSync(join(__dirname, '..', '..', 'docker-compose.yml'), 'utf8')) as { services: { connect: { environment: Record<string, string> } } };
    expect(compose.services.connect.environment.OUTBOX_CDC_PASSWORD).toBe(LOCAL_ROLE_PASSWORDS.cdc);
  });
});
