/** src/connector/render.ts: connector:render's JSON body and Strimzi KafkaConnector, from the deploy's own builder. */
import { parse as parseYaml } from 'yaml';
import { Command } from 'commander';
import { loadConfig, type OutboxOptions } from '../../../src/config';
import {
  connectorRequestBody,
  desiredConnectorConfig,
  renderConnector,
  strimziConnectorResource,
  STRIMZI_MANAGED_KEYS,
  type KafkaConnectorResource,
} from '../../../src/connector';
import { connectorCommands } from '../../../src/cli/connector-commands';
import { thrown } from '../../support/expect-error';

// Distinctive secrets in every place a password can be configured: none may ever be printed.
const SECRETS = ['pg-admin-S3cret', 'cdc-role-S3cret', 'router-role-S3cret'];
const config = (overrides: OutboxOptions = {}) =>
  loadConfig({
    env: { PGPASSWORD: SECRETS[0] as string, OUTBOX_CDC_PASSWORD: SECRETS[1] as string, OUTBOX_ROUTER_PASSWORD: SECRETS[2] as string },
    overrides,
  });

/** Runs `outbox connector:render …` in-process; returns its exit code and what it printed. */
async function run(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const program = new Command('outbox').exitOverride().option('--log-level <level>');
  for (const command of connectorCommands()) program.addCommand(command.exitOverride());
  const out: string[] = [];
  const err: string[] = [];
  const stdout = jest.spyOn(process.stdout, 'write').mockImplementation((chunk) => out.push(String(chunk)) > 0);
  const stderr = jest.spyOn(process.stderr, 'write').mockImplementation((chunk) => err.push(String(chunk)) > 0);
  const before = process.exitCode;
  const env = { ...process.env };
  try {
    process.env.PGPASSWORD = SECRETS[0];
    process.env.OUTBOX_CDC_PASSWORD = SECRETS[1];
    await program.parseAsync(['node', 'outbox', 'connector:render', ...argv, '--log-level', 'silent']);
    return { code: Number(process.exitCode ?? 0), stdout: out.join(''), stderr: err.join('') };
  } finally {
    stdout.mockRestore();
    stderr.mockRestore();
    process.exitCode = before;
    process.env = env;
  }
}

describe('connector:render --format json', () => {
  it('is the Connect REST body { name, config } with config exactly what a deploy with the same options applies', () => {
    const options = { force: true, build: { extra: { 'snapshot.mode': 'initial' }, topicPartitions: 6, databaseHost: 'postgres', databasePort: 5432 } };
    const body = JSON.parse(renderConnector(config(), { ...options, format: 'json' }));
    expect(body).toEqual({ name: 'outbox-connector', config: { ...desiredConnectorConfig(config(), options) } });
    expect(body.config).toMatchObject({ 'snapshot.mode': 'initial', 'topic.creation.default.partitions': '6', 'database.hostname': 'postgres', 'database.port': '5432' });
    expect(Object.keys(body)).toEqual(['name', 'config']);
  });

  it('prints the password as the config-provider reference the deploy stores, never a password', () => {
    const text = renderConnector(config({ connector: { passwordRef: '${file:/opt/secrets/cdc.properties:password}' } }));
    expect(JSON.parse(text).config['database.password']).toBe('${file:/opt/secrets/cdc.properties:password}');
    for (const secret of SECRETS) expect(text).not.toContain(secret);
    expect(JSON.parse(renderConnector(config())).config['database.password']).toBe('${env:OUTBOX_CDC_PASSWORD}');
  });

  it('refuses what the deploy refuses: unsafe --set without --force, a plain-text secret even with it', () => {
    expect(thrown(() => connectorRequestBody(config(), { build: { extra: { 'snapshot.mode': 'initial' } } })).code).toBe('CONNECTOR_UNSAFE');
    const plain = thrown(() => connectorRequestBody(config(), { force: true, build: { extra: { 'database.password': 'hunter2-plain' } } }));
    expect(plain.code).toBe('CONNECTOR_PROPERTY_FORBIDDEN');
    expect(plain.message).not.toContain('hunter2-plain');
  });
});

describe('connector:render --format strimzi', () => {
  const strimzi = { cluster: 'connect-prod', namespace: 'kafka', secretName: 'outbox-db', secretKey: 'cdc-password' };
  const text = renderConnector(config(), { format: 'strimzi', strimzi });
  const resource = parseYaml(text) as KafkaConnectorResource;
  const json = desiredConnectorConfig(config());

  it('parses back (YAML) to a KafkaConnector for the named KafkaConnect cluster', () => {
    expect(resource).toEqual(strimziConnectorResource(config(), { strimzi }));
    expect(resource).toMatchObject({
      apiVersion: 'kafka.strimzi.io/v1beta2',
      kind: 'KafkaConnector',
      metadata: { name: 'outbox-connector', namespace: 'kafka', labels: { 'strimzi.io/cluster': 'connect-prod' } },
      spec: { class: 'io.debezium.connector.postgresql.PostgresConnector', tasksMax: 1 },
    });
    expect(text.startsWith('# KafkaConnector')).toBe(true);
  });

  it('leaves out the keys Strimzi sets itself; every other value is the JSON config, as a string', () => {
    for (const key of STRIMZI_MANAGED_KEYS) expect(resource.spec.config).not.toHaveProperty(key);
    expect(Object.values(resource.spec.config).every((v) => typeof v === 'string')).toBe(true);
    const { 'database.password': password, ...rest } = resource.spec.config;
    const { name, 'connector.class': cls, 'tasks.max': tasks, 'database.password': _ref, ...expected } = json;
    expect(rest).toEqual(expected);
    expect([name, cls, tasks]).toEqual([resource.metadata.name, resource.spec.class, String(resource.spec.tasksMax)]);
    // Values YAML would otherwise read as other types or mangle survive the round trip.
    expect(resource.spec.config).toMatchObject({ 'tombstones.on.delete': 'false', 'poll.interval.ms': '5', 'message.prefix.exclude.list': '.*' });
    expect(password).toBe('${secrets:kafka/outbox-db:cdc-password}');
  });

  it('round-trips values YAML gives meaning to (comments, mappings, null, booleans, octal, empty)', () => {
    const extra = { 'x.colon': 'a: b # c', 'x.yes': 'yes', 'x.null': 'null', 'x.tilde': '~', 'x.octal': '0o17', 'x.empty': '', 'x.lead': '- item', 'x.quote': '"\'' };
    const back = parseYaml(renderConnector(config(), { format: 'strimzi', build: { extra } })) as KafkaConnectorResource;
    expect(back.spec.config).toMatchObject(extra);
  });

  it('never contains a password, only the Secret reference', () => {
    for (const secret of SECRETS) expect(text).not.toContain(secret);
    expect(text).not.toContain('${env:OUTBOX_CDC_PASSWORD}');
  });

  it('defaults: my-connect-cluster, namespace default, Secret outbox-credentials key cdc-password', () => {
    const plain = strimziConnectorResource(config());
    expect(plain.metadata).toEqual({ name: 'outbox-connector', namespace: 'default', labels: { 'strimzi.io/cluster': 'my-connect-cluster' } });
    expect(plain.spec.config['database.password']).toBe('${secrets:default/outbox-credentials:cdc-password}');
  });

  it('refuses names Kubernetes would refuse, naming the flag or setting', () => {
    const bad = thrown(() => strimziConnectorResource(config(), { strimzi: { namespace: 'Kafka_NS', secretName: 'a/b' } }));
    expect(bad.code).toBe('FLAG_INVALID');
    expect(bad.message).toContain('namespace (--namespace)');
    expect(bad.message).toContain('secretName (--secret-name)');
    const name = thrown(() => strimziConnectorResource(config({ connector: { name: 'Outbox_Connector' } })));
    expect(name.code).toBe('CONFIG_INVALID');
    expect(name.message).toContain('OUTBOX_CONNECTOR_NAME');
  });
});

describe('outbox connector:render (CLI)', () => {
  it('prints JSON by default and takes the deploy\'s build flags', async () => {
    const r = await run('--set', 'slot.max.retries=10', '--db-address', 'postgres:5432', '--partitions', '1');
    expect(r.code).toBe(0);
    const body = JSON.parse(r.stdout);
    expect(body.config).toEqual({
      ...desiredConnectorConfig(loadConfig({ env: {} }), { build: { extra: { 'slot.max.retries': '10' }, databaseHost: 'postgres', databasePort: 5432, topicPartitions: 1 } }),
    });
    for (const secret of SECRETS) expect(r.stdout + r.stderr).not.toContain(secret);
  });

  it('prints a KafkaConnector for --format strimzi', async () => {
    const r = await run('--format', 'strimzi', '--strimzi-cluster', 'c1', '--namespace', 'ns1', '--secret-name', 's1', '--secret-key', 'k1');
    expect(r.code).toBe(0);
    const resource = parseYaml(r.stdout) as KafkaConnectorResource;
    expect(resource.metadata.labels['strimzi.io/cluster']).toBe('c1');
    expect(resource.spec.config['database.password']).toBe('${secrets:ns1/s1:k1}');
    for (const secret of SECRETS) expect(r.stdout).not.toContain(secret);
  });

  it('exits 1 with FLAG_INVALID for Strimzi flags with --format json, and refuses an unsafe --set without --force', async () => {
    const mixed = await run('--namespace', 'kafka');
    expect(mixed.code).toBe(1);
    expect(mixed.stderr).toContain('apply to --format strimzi only');
    expect(mixed.stderr).toContain('FLAG_INVALID');
    const unsafe = await run('--set', 'snapshot.mode=initial');
    expect(unsafe.code).toBe(1);
    expect(unsafe.stderr).toContain('CONNECTOR_UNSAFE');
    expect((await run('--set', 'snapshot.mode=initial', '--force')).code).toBe(0);
  });
});
