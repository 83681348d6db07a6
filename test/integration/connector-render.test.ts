/**
 * connector:render against the real stack: what `outbox connector:render` prints is what
 * `outbox connector:deploy` makes Kafka Connect store. Both commands run in-process through the CLI with
 * the same --config file and build flags; a fresh database, random connector, slot, topic and role names;
 * everything created is removed in afterAll (the connector with its slot: deleteConnector dropSlot).
 *
 * What differs between the render and Connect's stored config: nothing. Connect adds `name` to a config
 * that lacks it, but the rendered config carries it already; and the password is stored as the same
 * `${env:OUTBOX_CDC_PASSWORD}` reference that was rendered, since Connect resolves config providers only
 * inside the worker when it starts the connector and tasks (GET …/config and …/tasks return it unresolved).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { parse as parseYaml, stringify } from 'yaml';
import { connectorCommands } from '../../src/cli/connector-commands';
import type { OutboxConfig } from '../../src/config';
import { createConnectClient, STRIMZI_MANAGED_KEYS, type ConnectClient, type KafkaConnectorResource } from '../../src/connector';
import { provision } from '../../src/provision';
import { teardownConnectorTest } from '../support/connector-teardown';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomIdentifier, randomName, stackUrls, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(120_000);

const id = randomIdentifier('rnd');
const connectUrl = process.env.OUTBOX_CONNECT_URL || stackUrls.connect;
let db: FreshDatabase;
let config: OutboxConfig;
let client: ConnectClient;
let configFile: string;

/** Runs one `outbox connector:*` command in-process; returns its exit code and what it printed. */
async function run(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const program = new Command('outbox').exitOverride().option('--log-level <level>');
  for (const command of connectorCommands()) program.addCommand(command);
  const out: string[] = [];
  const err: string[] = [];
  const stdout = jest.spyOn(process.stdout, 'write').mockImplementation((chunk) => out.push(String(chunk)) > 0);
  const stderr = jest.spyOn(process.stderr, 'write').mockImplementation((chunk) => err.push(String(chunk)) > 0);
  const before = process.exitCode;
  try {
    await program.parseAsync(['node', 'outbox', ...argv, '--config', configFile, '--log-level', 'silent']);
    return { code: Number(process.exitCode ?? 0), stdout: out.join(''), stderr: err.join('') };
  } finally {
    stdout.mockRestore();
    stderr.mockRestore();
    process.exitCode = before;
  }
}

beforeAll(async () => {
  db = await freshDatabase('rnd');
  config = testConfig(db.name, {
    connect: { url: connectUrl },
    // A Kubernetes resource name (no `_`), so the Strimzi render accepts it as metadata.name.
    connector: { name: randomName('render'), topicPrefix: id, topicReplacement: `t${id}.outbox.event.\${routedByValue}`, heartbeatIntervalMs: 1_000, deployTimeoutMs: 60_000 },
  });
  // The settings file both commands read: this file's database, roles and connector names.
  const { database, roles, connector } = config;
  const settings = {
    database: { database: database.database },
    roles: { cdc: roles.cdc, app: roles.app, monitor: roles.monitor, router: roles.router, relay: roles.relay },
    connect: { url: connectUrl },
    connector: { name: connector.name, slotName: connector.slotName, topicPrefix: id, topicReplacement: connector.topicReplacement, heartbeatIntervalMs: 1_000, deployTimeoutMs: 60_000 },
  };
  configFile = join(mkdtempSync(join(tmpdir(), 'render-')), 'outbox.yaml');
  writeFileSync(configFile, stringify(settings));
  client = createConnectClient(config.connect);
  await provision(config);
});

afterAll(() => teardownConnectorTest([config], db, id));

describe('connector:render on the real stack', () => {
  // The same build flags for render and deploy: --set and --partitions reach the config through one mapping.
  const flags = ['--set', 'slot.max.retries=7', '--partitions', '1'];

  it('renders JSON that connector:deploy then stores in Kafka Connect, key for key', async () => {
    const rendered = await run('connector:render', ...flags);
    expect(rendered.code).toBe(0);
    const body = JSON.parse(rendered.stdout) as { name: string; config: Record<string, string> };
    expect(body.name).toBe(config.connector.name);
    expect(body.config).toMatchObject({ 'slot.max.retries': '7', 'topic.creation.default.partitions': '1', 'database.password': config.connector.passwordRef });

    const deployed = await run('connector:deploy', ...flags, '--json');
    expect(deployed.stderr).toBe('');
    expect(deployed.code).toBe(0);
    expect(JSON.parse(deployed.stdout)).toMatchObject({ action: 'created', connector: body.name });

    // GET /connectors/<name>/config: the stored config is the rendered one, the password reference included.
    expect(await client.getConfig(body.name)).toEqual(body.config);
    // GET /connectors/<name>: its name and config are the rendered POST /connectors body.
    const info = (await (await fetch(`${connectUrl}/connectors/${encodeURIComponent(body.name)}`)).json()) as { name: string; config: Record<string, string> };
    expect({ name: info.name, config: info.config }).toEqual(body);
    // The tasks' configs hold the reference too: the worker resolves it when it starts them.
    const tasks = await client.tasks(body.name);
    expect(tasks.map((t) => t.config['database.password'])).toEqual([config.connector.passwordRef]);
    expect(JSON.stringify({ stored: await client.getConfig(body.name), tasks })).not.toContain(config.roles.cdcPassword as string);
  });

  it('a second deploy with the same flags finds nothing to write', async () => {
    const again = await run('connector:deploy', ...flags, '--json');
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ action: 'unchanged' });
  });

  it('the Strimzi KafkaConnector carries the stored config less the keys Strimzi sets, with the Secret reference as password', async () => {
    const rendered = await run('connector:render', ...flags, '--format', 'strimzi', '--namespace', 'kafka', '--secret-name', 'outbox-db');
    expect(rendered.code).toBe(0);
    const resource = parseYaml(rendered.stdout) as KafkaConnectorResource;
    const stored = (await client.getConfig(config.connector.name)) as Record<string, string>;
    const managed = new Set<string>([...STRIMZI_MANAGED_KEYS, 'database.password']);
    const expected = Object.fromEntries(Object.entries(stored).filter(([key]) => !managed.has(key)));
    const { 'database.password': password, ...rest } = resource.spec.config;
    expect(rest).toEqual(expected);
    expect(password).toBe('${secrets:kafka/outbox-db:cdc-password}');
    expect([resource.metadata.name, resource.spec.class, String(resource.spec.tasksMax)]).toEqual([stored.name, stored['connector.class'], stored['tasks.max']]);
  });
});
