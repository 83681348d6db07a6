import type { z } from 'zod';
import type { EnvSetting, EnvValueType } from './env-setting';
import { RELAY_ENV_SETTINGS } from './relay-schema';
import { ROUTER_ENV_SETTINGS } from './router-schema';
import { outboxConfigSchema } from './schema';
import { WATCHDOG_ENV_SETTINGS } from './watchdog-schema';

/**
 * The environment's side of the configuration: which variable feeds which setting, and how its text
 * becomes the setting's value. Every scalar leaf of the schema has exactly one variable (twelve-factor:
 * every setting from the file or the environment):
 *
 * - the explicit names below (and in the *-schema.ts tables) are contracts used by the README, the docs,
 *   docker-compose.yml and the manifests: they never change;
 * - every other leaf gets a derived name, `OUTBOX_` + its dotted path in UPPER_SNAKE_CASE
 *   (`router.backoff.initialDelayMs` → `OUTBOX_ROUTER_BACKOFF_INITIAL_DELAY_MS`).
 *
 * A record (`router.policies`) takes a JSON object. Every variable's type comes from the schema
 * (`settingLeaves`), explicit ones included: the hand tables name, they do not type.
 */
const EXPLICIT_ENV_SETTINGS: ReadonlyArray<EnvSetting> = [
  { env: 'PGHOST', path: ['database', 'host'] },
  { env: 'PGPORT', path: ['database', 'port'] },
  { env: 'PGDATABASE', path: ['database', 'database'] },
  { env: 'PGUSER', path: ['database', 'user'] },
  { env: 'PGPASSWORD', path: ['database', 'password'] },
  { env: 'OUTBOX_DB_SSL', path: ['database', 'ssl'] },
  { env: 'OUTBOX_DB_SSL_MODE', path: ['database', 'sslMode'] },
  { env: 'OUTBOX_DB_SSL_ROOT_CERT', path: ['database', 'sslRootCert'] },
  { env: 'OUTBOX_SCHEMA', path: ['outbox', 'schema'] },
  { env: 'OUTBOX_TABLE', path: ['outbox', 'table'] },
  { env: 'OUTBOX_INBOX_TABLE', path: ['outbox', 'inboxTable'] },
  { env: 'OUTBOX_PUBLICATION', path: ['outbox', 'publication'] },
  { env: 'OUTBOX_MAX_PAYLOAD_BYTES', path: ['outbox', 'maxPayloadBytes'] },
  { env: 'OUTBOX_CLEANUP_MODE', path: ['outbox', 'cleanupMode'] },
  { env: 'OUTBOX_PARTITION_SECONDS', path: ['outbox', 'partitionSeconds'] },
  { env: 'OUTBOX_PARTITIONS_AHEAD', path: ['outbox', 'partitionsAhead'] },
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
  { env: 'KAFKA_BROKERS', path: ['kafka', 'brokers'] },
  { env: 'OUTBOX_KAFKA_SSL', path: ['kafka', 'ssl', 'enabled'] },
  { env: 'OUTBOX_KAFKA_SSL_CA_FILE', path: ['kafka', 'ssl', 'caFile'] },
  { env: 'OUTBOX_KAFKA_SSL_CERT_FILE', path: ['kafka', 'ssl', 'certFile'] },
  { env: 'OUTBOX_KAFKA_SSL_KEY_FILE', path: ['kafka', 'ssl', 'keyFile'] },
  { env: 'OUTBOX_KAFKA_SSL_KEY_PASSWORD', path: ['kafka', 'ssl', 'keyPassword'] },
  { env: 'OUTBOX_KAFKA_SSL_REJECT_UNAUTHORIZED', path: ['kafka', 'ssl', 'rejectUnauthorized'] },
  { env: 'OUTBOX_KAFKA_SASL_MECHANISM', path: ['kafka', 'sasl', 'mechanism'] },
  { env: 'OUTBOX_KAFKA_SASL_USERNAME', path: ['kafka', 'sasl', 'username'] },
  { env: 'OUTBOX_KAFKA_SASL_PASSWORD', path: ['kafka', 'sasl', 'password'] },
  { env: 'OUTBOX_KAFKA_SASL_OAUTHBEARER_TOKEN', path: ['kafka', 'sasl', 'oauthbearer', 'token'] },
  { env: 'OUTBOX_KAFKA_SASL_OAUTHBEARER_TOKEN_URL', path: ['kafka', 'sasl', 'oauthbearer', 'tokenUrl'] },
  { env: 'OUTBOX_KAFKA_SASL_OAUTHBEARER_CLIENT_ID', path: ['kafka', 'sasl', 'oauthbearer', 'clientId'] },
  { env: 'OUTBOX_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET', path: ['kafka', 'sasl', 'oauthbearer', 'clientSecret'] },
  { env: 'OUTBOX_KAFKA_SASL_OAUTHBEARER_SCOPE', path: ['kafka', 'sasl', 'oauthbearer', 'scope'] },
  { env: 'OUTBOX_KAFKA_SASL_AWS_REGION', path: ['kafka', 'sasl', 'aws', 'region'] },
  { env: 'OUTBOX_REGISTRY_URL', path: ['registry', 'url'] },
  { env: 'OUTBOX_REGISTRY_USERNAME', path: ['registry', 'username'] },
  { env: 'OUTBOX_REGISTRY_PASSWORD', path: ['registry', 'password'] },
  { env: 'OUTBOX_REGISTRY_CA_FILE', path: ['registry', 'caFile'] },
  { env: 'OUTBOX_REGISTRY_REJECT_UNAUTHORIZED', path: ['registry', 'rejectUnauthorized'] },
  { env: 'OUTBOX_CONNECT_URL', path: ['connect', 'url'] },
  { env: 'OUTBOX_CONNECT_USERNAME', path: ['connect', 'username'] },
  { env: 'OUTBOX_CONNECT_PASSWORD', path: ['connect', 'password'] },
  { env: 'OUTBOX_CONNECT_CA_FILE', path: ['connect', 'caFile'] },
  { env: 'OUTBOX_CONNECT_REJECT_UNAUTHORIZED', path: ['connect', 'rejectUnauthorized'] },
  { env: 'OUTBOX_CONNECTOR_NAME', path: ['connector', 'name'] },
  { env: 'OUTBOX_CONNECTOR_SSL_ROOT_CERT', path: ['connector', 'sslRootCert'] },
  { env: 'OUTBOX_SLOT_NAME', path: ['connector', 'slotName'] },
  ...ROUTER_ENV_SETTINGS,
  ...WATCHDOG_ENV_SETTINGS,
  ...RELAY_ENV_SETTINGS,
];

/** One leaf of the schema: a value set as a whole (a scalar, a list or a record). */
export interface SettingLeaf {
  path: string[];
  type: EnvValueType;
  /** The allowed values of an enum. */
  values?: readonly string[];
}

type Def = { type: string; innerType?: z.ZodType; in?: z.ZodType; shape?: Record<string, z.ZodType>; element?: z.ZodType; entries?: Record<string, string> };
const defOf = (schema: z.ZodType) => (schema as unknown as { _zod: { def: Def } })._zod.def;

/** Wrappers that do not change what a setting holds: defaults, optionality, a transform after the object. */
function unwrap(schema: z.ZodType): z.ZodType {
  let node = schema;
  for (;;) {
    const def = defOf(node);
    if (['default', 'prefault', 'optional', 'nullable', 'readonly', 'catch'].includes(def.type) && def.innerType) node = def.innerType;
    else if (def.type === 'pipe' && def.in) node = def.in;
    else return node;
  }
}

/** Every leaf of a schema, in schema order, with the type its variable takes. */
export function settingLeaves(schema: z.ZodType = outboxConfigSchema, prefix: string[] = []): SettingLeaf[] {
  const node = unwrap(schema);
  const def = defOf(node);
  switch (def.type) {
    case 'object':
      return Object.entries(def.shape ?? {}).flatMap(([key, child]) => settingLeaves(child, [...prefix, key]));
    case 'number':
      return [{ path: prefix, type: 'number' }];
    case 'boolean':
      return [{ path: prefix, type: 'boolean' }];
    case 'enum':
      return [{ path: prefix, type: 'enum', values: Object.values(def.entries ?? {}) }];
    case 'array':
      if (defOf(unwrap(def.element as z.ZodType)).type !== 'string') throw new Error(`${prefix.join('.')}: a list of non-strings has no environment form`);
      return [{ path: prefix, type: 'list' }];
    case 'record':
      return [{ path: prefix, type: 'json' }];
    case 'string':
      return [{ path: prefix, type: 'string' }];
    case 'custom':
      // A function given in code (kafka.sasl.oauthbearer.provider): no file or environment form.
      return [];
    default:
      throw new Error(`${prefix.join('.')}: a ${def.type} setting has no environment form (src/config/env.ts)`);
  }
}

/** The derived name of a setting: `router.backoff.initialDelayMs` → `OUTBOX_ROUTER_BACKOFF_INITIAL_DELAY_MS`. */
export function derivedEnvName(path: readonly string[]): string {
  return ['OUTBOX', ...path.map((key) => key.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase())].join('_');
}

/** The leaves of the schema, by dotted path. */
export const SETTING_LEAVES: ReadonlyMap<string, SettingLeaf> = new Map(settingLeaves().map((leaf) => [leaf.path.join('.'), leaf]));

/** Explicit names first (they win), then a derived name for every leaf without one. */
function allEnvSettings(): EnvSetting[] {
  const explicit = new Set(EXPLICIT_ENV_SETTINGS.map((s) => s.path.join('.')));
  const typed = (s: EnvSetting): EnvSetting => {
    const leaf = SETTING_LEAVES.get(s.path.join('.'));
    // A path that is not a leaf keeps no type; a unit test (env.test.ts) refuses it.
    return { ...s, type: leaf?.type ?? 'string', ...(leaf?.values ? { values: leaf.values } : {}) };
  };
  const derived = [...SETTING_LEAVES.values()].filter((leaf) => !explicit.has(leaf.path.join('.'))).map((leaf) => typed({ env: derivedEnvName(leaf.path), path: leaf.path, derived: true }));
  return [...EXPLICIT_ENV_SETTINGS.map(typed), ...derived];
}

/** Environment variables read by loadConfig, and the setting each one feeds: every leaf of the schema, once. */
export const ENV_SETTINGS: ReadonlyArray<EnvSetting> = allEnvSettings();

const TRUE_WORDS = ['1', 'true', 'yes', 'on'];
const FALSE_WORDS = ['0', 'false', 'no', 'off'];

/** What a variable of this setting takes, as told in an error: "a number such as 30000". */
export function envForm(setting: EnvSetting): string | undefined {
  switch (setting.type) {
    case 'number':
      return 'a number such as 30000 (digits, no units)';
    case 'boolean':
      return `${TRUE_WORDS.join('/')} or ${FALSE_WORDS.join('/')}`;
    case 'list':
      return 'a comma-separated list such as a,b';
    case 'enum':
      return `one of ${(setting.values ?? []).join(', ')}`;
    case 'json':
      return 'a JSON object such as {"order":"block"}';
    default:
      return undefined;
  }
}

/**
 * The value a variable's text gives its setting. Text that is not of the setting's form is passed on
 * as it is, so that validation rejects it with the other problems, naming the variable.
 */
export function envValue(setting: EnvSetting, raw: string): unknown {
  const text = raw.trim();
  switch (setting.type) {
    case 'number':
      return /^-?\d+(\.\d+)?$/.test(text) ? Number(text) : raw;
    case 'boolean':
      return TRUE_WORDS.includes(text.toLowerCase()) ? true : FALSE_WORDS.includes(text.toLowerCase()) ? false : raw;
    case 'enum':
      return text;
    case 'list':
      return raw.split(',').map((s) => s.trim()).filter(Boolean);
    case 'json':
      try {
        const parsed: unknown = JSON.parse(text);
        return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : raw;
      } catch {
        return raw;
      }
    default:
      return raw;
  }
}
