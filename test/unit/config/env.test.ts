/**
 * Twelve-factor configuration: every setting of every service can come from the environment, through
 * the one path loadConfig takes (src/config/env.ts). No network: env is an object passed in.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { derivedEnvName, ENV_SETTINGS, loadConfig, loadConfigWithSources, SETTING_LEAVES, type EnvSetting } from '../../../src/config';
import { describeConfig, renderConfigText } from '../../../src/config/describe';
import { OutboxError } from '../../../src/errors';
import { SECRET_KEY } from '../../../src/log/redact';

type Tree = Record<string, unknown>;
const at = (tree: unknown, path: readonly string[]): unknown => path.reduce<unknown>((node, key) => (node as Tree | undefined)?.[key], tree);
const defaults = loadConfig({ env: {} });

/** Values a generic rule cannot make valid (a format, a range, a pair that must stay ordered). */
const SAMPLES: Record<string, string> = {
  'kafka.sasl.mechanism': 'scram-sha-512',
  'watchdog.webhookSecret': `whsec_${Buffer.alloc(32, 7).toString('base64')}`,
  'connector.topicReplacement': 'events.${routedByValue}',
  'connector.passwordRef': '${env:OTHER_CDC_PASSWORD}',
  'connector.name': 'other-connector',
  'connector.slotName': 'other_slot',
  'connector.topicPrefix': 'other',
  'watchdog.clearRatioBytes': '0.8',
  'watchdog.clearRatioTime': '1.5',
  'watchdog.rules.retainedPercentOfKeepSize.warning': '30',
  'watchdog.rules.retainedPercentOfKeepSize.critical': '60',
  'router.partitionsConsumedConcurrently': '8',
  'router.maxAttempts': '7',
  'router.lanes': '3',
  'router.poolSize': '9',
  'router.dlqReplicationFactor': '3',
  'watchdog.standby.databaseUrl': 'postgres://monitor@standby.test:5432/app',
  'router.maxTransactionRecords': '100',
  'router.sessionTimeoutMs': '20000',
  'router.inboxPartitionIntervalMs': '86400000',
  'console.token': 'v_token-of-sixteen-chars',
  'acls.connectPrincipal': 'User:v_connect',
  'acls.connectorPrincipal': 'User:v_connector',
  'acls.routerPrincipal': 'User:v_router',
  'acls.replayPrincipal': 'User:v_replay',
  'acls.relayPrincipal': 'User:v_relay',
  'acls.statusPrincipal': 'User:v_status',
  'acls.consolePrincipal': 'User:v_console',
  'router.envelope.defaultContentType': 'application/json',
};

/** A valid value for the setting that differs from its default, as the variable's text, and the value it must give. */
function sample(s: EnvSetting): { text: string; value: unknown } {
  const dotted = s.path.join('.');
  const def = at(defaults, s.path);
  const given = SAMPLES[dotted];
  switch (s.type) {
    case 'number': {
      const text = given ?? String(typeof def === 'number' ? def + 1 : 7);
      return { text, value: Number(text) };
    }
    case 'boolean':
      return def === true ? { text: 'off', value: false } : { text: 'yes', value: true };
    case 'enum': {
      const value = given ?? (s.values ?? []).find((v) => v !== def);
      return { text: value as string, value };
    }
    case 'list':
      return { text: ' h1:1, h2:2 ,', value: ['h1:1', 'h2:2'] };
    case 'json':
      return { text: '{"order":"block"}', value: { order: 'block' } };
    default: {
      const text = given ?? (/url$/i.test(dotted) ? 'https://example.test:1' : `v_${s.path[s.path.length - 1]?.toLowerCase()}`);
      return { text, value: text };
    }
  }
}

describe('every setting from the environment', () => {
  const env = Object.fromEntries(ENV_SETTINGS.map((s) => [s.env, sample(s).text]));
  const { config, sources } = loadConfigWithSources({ env });

  it('has one variable per leaf of the schema, and a leaf for every variable', () => {
    const paths = ENV_SETTINGS.map((s) => s.path.join('.'));
    expect(new Set(paths).size).toBe(paths.length);
    expect([...paths].sort()).toEqual([...SETTING_LEAVES.keys()].sort());
  });

  it('reaches every leaf of the resolved configuration', () => {
    const leaves: string[] = [];
    const walk = (node: unknown, path: string[]) => {
      if (SETTING_LEAVES.has(path.join('.')) || !node || typeof node !== 'object' || Array.isArray(node)) leaves.push(path.join('.'));
      else for (const [key, child] of Object.entries(node)) walk(child, [...path, key]);
    };
    walk(config, []);
    expect(leaves.filter((path) => !ENV_SETTINGS.some((s) => s.path.join('.') === path))).toEqual([]);
    expect(leaves.length).toBe(ENV_SETTINGS.length);
  });

  it.each(ENV_SETTINGS.map((s) => [s.env, s] as const))('%s sets its setting to a value other than the default', (_name, s) => {
    const { value } = sample(s);
    expect(value).not.toEqual(at(defaults, s.path));
    expect(at(config, s.path)).toEqual(value);
    expect(sources.get(s.path.join('.'))).toEqual({ kind: 'env', name: s.env });
  });
});

describe('variable names', () => {
  const OTHER_VARIABLES = ['OUTBOX_STACK_DIR', 'OUTBOX_CACHE_DIR', 'OUTBOX_REGISTRY_JAVA_HOME', 'OUTBOX_STACK_READY_TIMEOUT_MS', 'LOG_LEVEL', 'LOG_FORMAT', 'JAVA_HOME', 'STACK'];

  it('derive as OUTBOX_ + the path in UPPER_SNAKE_CASE', () => {
    expect(derivedEnvName(['router', 'backoff', 'initialDelayMs'])).toBe('OUTBOX_ROUTER_BACKOFF_INITIAL_DELAY_MS');
    expect(derivedEnvName(['watchdog', 'rules', 'diskFullEtaMs', 'warning'])).toBe('OUTBOX_WATCHDOG_RULES_DISK_FULL_ETA_MS_WARNING');
    for (const s of ENV_SETTINGS.filter((e) => e.derived)) expect(s.env).toBe(derivedEnvName(s.path));
  });

  it('keep the explicit contract names (they win over derived ones)', () => {
    const byPath = new Map(ENV_SETTINGS.map((s) => [s.path.join('.'), s]));
    expect(byPath.get('database.port')).toMatchObject({ env: 'PGPORT', type: 'number' });
    expect(byPath.get('router.partitionsConsumedConcurrently')?.env).toBe('OUTBOX_ROUTER_PARTITIONS');
    expect(byPath.get('watchdog.outboxCleanup.enabled')?.env).toBe('OUTBOX_WATCHDOG_OUTBOX_CLEANUP');
    expect(byPath.get('router.backoff.initialDelayMs')).toMatchObject({ env: 'OUTBOX_ROUTER_BACKOFF_INITIAL_DELAY_MS', derived: true });
  });

  it('never name two settings, nor a variable the tool reads for something else', () => {
    const seen = new Map<string, string>(OTHER_VARIABLES.map((name) => [name, '(not a setting)']));
    const clashes: string[] = [];
    for (const s of ENV_SETTINGS) {
      const other = seen.get(s.env);
      if (other) clashes.push(`${s.env}: ${s.path.join('.')} and ${other}`);
      seen.set(s.env, s.path.join('.'));
    }
    expect(clashes).toEqual([]);
  });

  it('a derived name never equals an explicit name of another setting', () => {
    const explicit = new Map(ENV_SETTINGS.filter((s) => !s.derived).map((s) => [s.env, s.path.join('.')]));
    const clashes = [...SETTING_LEAVES.values()]
      .map((leaf) => ({ path: leaf.path.join('.'), env: derivedEnvName(leaf.path) }))
      .filter(({ path, env }) => explicit.has(env) && explicit.get(env) !== path);
    expect(clashes).toEqual([]);
  });

  it('a secret setting has a secret-looking variable name too', () => {
    for (const s of ENV_SETTINGS.filter((e) => SECRET_KEY.test(e.path[e.path.length - 1] ?? ''))) expect(s.env).toMatch(SECRET_KEY);
  });
});

describe('values of the wrong form', () => {
  const problem = (env: Record<string, string>): string => {
    try {
      loadConfig({ env });
    } catch (error) {
      expect(error).toBeInstanceOf(OutboxError);
      expect((error as OutboxError).code).toBe('CONFIG_INVALID');
      return (error as OutboxError).message;
    }
    throw new Error('loadConfig accepted it');
  };

  it('a number names the variable and the form', () => {
    const message = problem({ OUTBOX_ROUTER_BACKOFF_INITIAL_DELAY_MS: '2s' });
    expect(message).toContain('router.backoff.initialDelayMs (from OUTBOX_ROUTER_BACKOFF_INITIAL_DELAY_MS)');
    expect(message).toContain('"2s"');
    expect(message).toContain('OUTBOX_ROUTER_BACKOFF_INITIAL_DELAY_MS takes a number such as 30000');
  });

  it('a boolean names the variable and the words it takes', () => {
    const message = problem({ OUTBOX_ROUTER_PARK_KEYS: 'maybe' });
    expect(message).toContain('router.parkKeys (from OUTBOX_ROUTER_PARK_KEYS)');
    expect(message).toContain('OUTBOX_ROUTER_PARK_KEYS takes 1/true/yes/on or 0/false/no/off');
  });

  it('an enum names the variable and its values', () => {
    const message = problem({ OUTBOX_ROUTER_DEFAULT_POLICY: 'skip' });
    expect(message).toContain('router.defaultPolicy (from OUTBOX_ROUTER_DEFAULT_POLICY)');
    expect(message).toContain('OUTBOX_ROUTER_DEFAULT_POLICY takes one of dead-letter, block');
  });

  it('an enum value is trimmed, like numbers and booleans', () => {
    expect(loadConfig({ env: { OUTBOX_ROUTER_DEFAULT_POLICY: ' block ', OUTBOX_ROUTER_PARK_KEYS: ' Off ', OUTBOX_RELAY_POOL_SIZE: ' 12 ' } }).router.defaultPolicy).toBe('block');
  });

  it('a list names the variable and the form', () => {
    const message = problem({ KAFKA_BROKERS: ' , ,' });
    expect(message).toContain('kafka.brokers (from KAFKA_BROKERS)');
    expect(message).toContain('KAFKA_BROKERS takes a comma-separated list');
  });

  it('a record takes a JSON object; not JSON, or a bad entry, names the variable', () => {
    expect(problem({ OUTBOX_ROUTER_POLICIES: 'order=block' })).toContain('OUTBOX_ROUTER_POLICIES takes a JSON object');
    const entry = problem({ OUTBOX_ROUTER_UNKNOWN_EVENT_TYPES: '{"order":"ignore"}' });
    expect(entry).toContain('router.unknownEventTypes.order (from OUTBOX_ROUTER_UNKNOWN_EVENT_TYPES)');
    expect(entry).toContain('OUTBOX_ROUTER_UNKNOWN_EVENT_TYPES takes a JSON object');
  });

  it('a bad value of a secret setting is never echoed', () => {
    const message = problem({ PGPASSWORD: 'x', OUTBOX_WATCHDOG_WEBHOOK_SECRET: 'whsec_not-base64!' });
    expect(message).toContain('watchdog.webhookSecret (from OUTBOX_WATCHDOG_WEBHOOK_SECRET)');
    expect(message).not.toContain('not-base64');
  });
});

describe('records from a variable', () => {
  it('replace the record of the file whole, and config print names the variable for each entry', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'outbox-env-')), 'outbox.yaml');
    writeFileSync(file, 'router:\n  policies:\n    order: block\n');
    expect(loadConfig({ file, env: {} }).router.policies).toEqual({ order: 'block' });
    const { config, sources } = loadConfigWithSources({ file, env: { OUTBOX_ROUTER_POLICIES: '{"payment":"block"}' } });
    expect(config.router.policies).toEqual({ payment: 'block' });
    const printed = describeConfig({ config, sources }).find((s) => s.path === 'router.policies.payment');
    expect(printed).toEqual({ path: 'router.policies.payment', value: 'block', source: 'env OUTBOX_ROUTER_POLICIES' });
  });
});

describe('config print', () => {
  it('redacts every secret setting set from its variable, explicit or derived', () => {
    const secrets = ENV_SETTINGS.filter((s) => SECRET_KEY.test(s.path[s.path.length - 1] ?? ''));
    expect(secrets.length).toBeGreaterThan(10);
    const env: Record<string, string> = Object.fromEntries(secrets.map((s) => [s.env, sample(s).text]));
    Object.assign(env, { OUTBOX_KAFKA_SSL_CERT_FILE: '/c.pem', OUTBOX_KAFKA_SSL_KEY_FILE: '/k.pem', OUTBOX_KAFKA_SASL_MECHANISM: 'plain', OUTBOX_KAFKA_SASL_USERNAME: 'u', OUTBOX_CONSOLE_USERNAME: 'ops' });
    const loaded = loadConfigWithSources({ env });
    const text = renderConfigText(describeConfig(loaded));
    for (const s of secrets) {
      const line = text.split('\n').find((l) => l.startsWith(`${s.path.join('.')} `));
      expect(line).toContain('"[redacted]"');
      expect(line).toContain(`(env ${s.env})`);
      expect(text).not.toContain(env[s.env] as string);
    }
  });
});
