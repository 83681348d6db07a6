import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { OutboxError } from '../errors';
import type { EnvSetting } from './env-setting';
import { parse } from './parse';
import { redactConfig, withoutUserinfo } from './redact';
import { RELAY_ENV_SETTINGS } from './relay-schema';
import { ROUTER_ENV_SETTINGS } from './router-schema';
import { WATCHDOG_ENV_SETTINGS } from './watchdog-schema';
import { outboxConfigSchema, type OutboxConfig, type OutboxOptions } from './schema';

/** What set a setting: its schema default, an env var, the config file, a command-line flag, or code. */
export type ConfigSource = { kind: 'default' } | { kind: 'env'; name: string } | { kind: 'file'; path: string } | { kind: 'flag'; name: string } | { kind: 'option' };

/** Environment variables read by loadConfig, and the setting each one feeds. */
export const ENV_SETTINGS: ReadonlyArray<EnvSetting> = [
  { env: 'PGHOST', path: ['database', 'host'] },
  { env: 'PGPORT', path: ['database', 'port'], type: 'number' },
  { env: 'PGDATABASE', path: ['database', 'database'] },
  { env: 'PGUSER', path: ['database', 'user'] },
  { env: 'PGPASSWORD', path: ['database', 'password'] },
  { env: 'OUTBOX_DB_SSL', path: ['database', 'ssl'], type: 'boolean' },
  { env: 'OUTBOX_SCHEMA', path: ['outbox', 'schema'] },
  { env: 'OUTBOX_TABLE', path: ['outbox', 'table'] },
  { env: 'OUTBOX_INBOX_TABLE', path: ['outbox', 'inboxTable'] },
  { env: 'OUTBOX_PUBLICATION', path: ['outbox', 'publication'] },
  { env: 'OUTBOX_MAX_PAYLOAD_BYTES', path: ['outbox', 'maxPayloadBytes'], type: 'number' },
  { env: 'OUTBOX_CDC_ROLE', path: ['roles', 'cdc'] },
  { env: 'OUTBOX_CDC_PASSWORD', path: ['roles', 'cdcPassword'] },
  { env: 'OUTBOX_APP_ROLE', path: ['roles', 'app'] },
  { env: 'OUTBOX_APP_PASSWORD', path: ['roles', 'appPassword'] },
  { env: 'OUTBOX_MONITOR_ROLE', path: ['roles', 'monitor'] },
  { env: 'OUTBOX_MONITOR_PASSWORD', path: ['roles', 'monitorPassword'] },
  { env: 'OUTBOX_ROUTER_ROLE', path: ['roles', 'router'] },
  { env: 'OUTBOX_ROUTER_PASSWORD', path: ['roles', 'routerPassword'] },
  { env: 'OUTBOX_RELAY_ROLE', path: ['roles', 'relay'] },
  { env: 'OUTBOX_RELAY_PASSWORD', path: ['roles', 'relayPassword'] },
  { env: 'KAFKA_BROKERS', path: ['kafka', 'brokers'], type: 'list' },
  { env: 'OUTBOX_KAFKA_SSL', path: ['kafka', 'ssl', 'enabled'], type: 'boolean' },
  { env: 'OUTBOX_KAFKA_SSL_CA_FILE', path: ['kafka', 'ssl', 'caFile'] },
  { env: 'OUTBOX_KAFKA_SSL_CERT_FILE', path: ['kafka', 'ssl', 'certFile'] },
  { env: 'OUTBOX_KAFKA_SSL_KEY_FILE', path: ['kafka', 'ssl', 'keyFile'] },
  { env: 'OUTBOX_KAFKA_SSL_KEY_PASSWORD', path: ['kafka', 'ssl', 'keyPassword'] },
  { env: 'OUTBOX_KAFKA_SSL_REJECT_UNAUTHORIZED', path: ['kafka', 'ssl', 'rejectUnauthorized'], type: 'boolean' },
  { env: 'OUTBOX_KAFKA_SASL_MECHANISM', path: ['kafka', 'sasl', 'mechanism'] },
  { env: 'OUTBOX_KAFKA_SASL_USERNAME', path: ['kafka', 'sasl', 'username'] },
  { env: 'OUTBOX_KAFKA_SASL_PASSWORD', path: ['kafka', 'sasl', 'password'] },
  { env: 'OUTBOX_REGISTRY_URL', path: ['registry', 'url'] },
  { env: 'OUTBOX_REGISTRY_USERNAME', path: ['registry', 'username'] },
  { env: 'OUTBOX_REGISTRY_PASSWORD', path: ['registry', 'password'] },
  { env: 'OUTBOX_REGISTRY_CA_FILE', path: ['registry', 'caFile'] },
  { env: 'OUTBOX_REGISTRY_REJECT_UNAUTHORIZED', path: ['registry', 'rejectUnauthorized'], type: 'boolean' },
  { env: 'OUTBOX_CONNECT_URL', path: ['connect', 'url'] },
  { env: 'OUTBOX_CONNECT_USERNAME', path: ['connect', 'username'] },
  { env: 'OUTBOX_CONNECT_PASSWORD', path: ['connect', 'password'] },
  { env: 'OUTBOX_CONNECT_CA_FILE', path: ['connect', 'caFile'] },
  { env: 'OUTBOX_CONNECT_REJECT_UNAUTHORIZED', path: ['connect', 'rejectUnauthorized'], type: 'boolean' },
  { env: 'OUTBOX_CONNECTOR_NAME', path: ['connector', 'name'] },
  { env: 'OUTBOX_SLOT_NAME', path: ['connector', 'slotName'] },
  ...ROUTER_ENV_SETTINGS,
  ...WATCHDOG_ENV_SETTINGS,
  ...RELAY_ENV_SETTINGS,
];

export interface LoadConfigOptions {
  /** Settings from code or CLI flags: they win over everything else. */
  overrides?: OutboxOptions;
  /** A JSON or YAML file (`--config`). */
  file?: string;
  env?: NodeJS.ProcessEnv;
  /** The flag that set each override, by dotted path (`router.lanes` → `--lanes`): named as the source. */
  flagNames?: Readonly<Record<string, string>>;
}

/** The resolved configuration and, by dotted path, what set each value the input held (the rest are defaults). */
export interface LoadedConfig {
  config: OutboxConfig;
  sources: ReadonlyMap<string, ConfigSource>;
}

type Tree = Record<string, unknown>;

function setPath(tree: Tree, path: readonly string[], value: unknown): void {
  let node = tree;
  for (const key of path.slice(0, -1)) {
    if (typeof node[key] !== 'object' || node[key] === null) node[key] = {};
    node = node[key] as Tree;
  }
  node[path[path.length - 1] as string] = value;
}

function deepMerge(base: Tree, over: Tree): Tree {
  const out: Tree = { ...base };
  for (const [key, value] of Object.entries(over)) {
    if (value === undefined) continue;
    const prev = out[key];
    out[key] =
      value && typeof value === 'object' && !Array.isArray(value) && prev && typeof prev === 'object' && !Array.isArray(prev)
        ? deepMerge(prev as Tree, value as Tree)
        : value;
  }
  return out;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

function readConfigFile(path: string): Tree {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new OutboxError('CONFIG_FILE_INVALID', `Cannot read the config file ${path}: ${(error as Error).message}. Check the --config path.`, { cause: error });
  }
  try {
    const parsed: unknown = parseYaml(text);
    if (parsed === null || parsed === undefined) return {};
    if (typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('the top level must be a mapping of sections (database, outbox, connector, …)');
    return parsed as Tree;
  } catch (error) {
    throw new OutboxError('CONFIG_FILE_INVALID', `The config file ${path} is not valid JSON or YAML: ${(error as Error).message}.`, { cause: error });
  }
}

/**
 * Resolves the configuration once: schema defaults < file < environment < overrides. Every invalid
 * field is reported in one error, with where it came from; secret values are never echoed.
 */
export function loadConfig(options: LoadConfigOptions = {}): OutboxConfig {
  return loadConfigWithSources(options).config;
}

/** loadConfig, also telling what set each value (`outbox config print`). */
export function loadConfigWithSources(options: LoadConfigOptions = {}): LoadedConfig {
  const env = options.env ?? process.env;
  const sources = new Map<string, ConfigSource>();
  let tree: Tree = {};

  if (options.file) {
    const fromFile = readConfigFile(options.file);
    tree = deepMerge(tree, fromFile);
    const mark = (node: Tree, prefix: string[]) => {
      for (const [k, v] of Object.entries(node)) {
        const p = [...prefix, k];
        if (v && typeof v === 'object' && !Array.isArray(v)) mark(v as Tree, p);
        else sources.set(p.join('.'), { kind: 'file', path: options.file as string });
      }
    };
    mark(fromFile, []);
  }

  const fromEnv: Tree = {};
  for (const setting of ENV_SETTINGS) {
    const raw = env[setting.env];
    if (raw === undefined || raw === '') continue;
    let value: unknown = raw;
    if (setting.type === 'number') value = /^-?\d+(\.\d+)?$/.test(raw.trim()) ? Number(raw) : raw;
    if (setting.type === 'list') value = raw.split(',').map((s) => s.trim()).filter(Boolean);
    if (setting.type === 'boolean') value = ['1', 'true', 'yes', 'on'].includes(raw.toLowerCase()) ? true : ['0', 'false', 'no', 'off'].includes(raw.toLowerCase()) ? false : raw;
    setPath(fromEnv, setting.path, value);
    sources.set(setting.path.join('.'), { kind: 'env', name: setting.env });
  }
  tree = deepMerge(tree, fromEnv);
  const overrides = (options.overrides ?? {}) as Tree;
  const markOptions = (node: Tree, prefix: string[]) => {
    for (const [k, v] of Object.entries(node)) {
      if (v === undefined) continue;
      const p = [...prefix, k];
      if (v && typeof v === 'object' && !Array.isArray(v)) markOptions(v as Tree, p);
      else {
        const flag = options.flagNames?.[p.join('.')];
        sources.set(p.join('.'), flag ? { kind: 'flag', name: flag } : { kind: 'option' });
      }
    }
  };
  markOptions(overrides, []);
  tree = deepMerge(tree, overrides);

  const where = (path: string): string => {
    const source = sources.get(path);
    return source?.kind === 'env' ? ` (from ${source.name})` : source?.kind === 'file' ? ` (in ${source.path})` : source?.kind === 'flag' ? ` (from ${source.name})` : '';
  };
  const config = parse(outboxConfigSchema, tree, { heading: 'Invalid configuration; nothing was changed', origin: where });
  return { config: deepFreeze(config), sources };
}

export { redactConfig, withoutUserinfo };

/**
 * A PEM file a setting names (CA bundle, certificate, key), read when a client is built; a missing
 * or unreadable file is TLS_FILE_UNREADABLE naming the setting and the path, never the content.
 */
export function readPemFile(path: string, setting: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new OutboxError('TLS_FILE_UNREADABLE', `Cannot read ${setting} ${path}: ${(error as Error).message}. Point ${setting} at a readable PEM file.`, {
      cause: error,
      details: { setting, path },
    });
  }
}
