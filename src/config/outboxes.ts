import { OutboxError } from '../errors';
import type { ConfigSource } from './load';
import type { OutboxConfig } from './schema';

/**
 * Several outboxes in one configuration (docs/multi-outbox.md): the file's `outboxes` section maps a name
 * to the settings that differ from the shared ones (another database, schema, table, connector, slot,
 * topics). Each entry is resolved over the shared settings into a whole configuration; its own variables
 * are the shared ones prefixed with `OUTBOX__<NAME>__` (`OUTBOX__BILLING__PGPASSWORD`, and `…_FILE` for
 * a secret), so a per-outbox password never has to sit in the file.
 */
export interface NamedOutbox {
  name: string;
  config: OutboxConfig;
  sources: ReadonlyMap<string, ConfigSource>;
}

/** Lower-case letters, digits, `-` and `_`: a name that is also an environment variable's part and a label. */
export const OUTBOX_NAME = /^[a-z][a-z0-9_-]{0,39}$/;

type Tree = Record<string, unknown>;

const isMapping = (value: unknown): value is Tree => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The `outboxes` section as [name, entry] pairs, or CONFIG_FILE_INVALID naming what is wrong with it. */
export function outboxEntries(section: unknown, file: string | undefined): Array<[string, Tree]> {
  if (section === undefined || section === null) return [];
  const where = `the config file ${file ?? ''}`.trim();
  if (!isMapping(section)) {
    throw new OutboxError('CONFIG_FILE_INVALID', `outboxes in ${where} must be a mapping of outbox names to their settings (outboxes: { billing: { database: { database: billing } } }).`);
  }
  const entries = Object.entries(section);
  if (entries.length === 0) throw new OutboxError('CONFIG_FILE_INVALID', `outboxes in ${where} is empty: name at least one outbox, or leave the section out.`);
  for (const [name, entry] of entries) {
    if (!OUTBOX_NAME.test(name)) {
      throw new OutboxError('CONFIG_FILE_INVALID', `outboxes.${JSON.stringify(name)} in ${where}: an outbox name is a lower-case letter, then up to 39 lower-case letters, digits, "-" or "_" (e.g. billing, tenant-a).`);
    }
    if (!isMapping(entry)) throw new OutboxError('CONFIG_FILE_INVALID', `outboxes.${name} in ${where} must be a mapping of settings (database, outbox, connector, …).`);
    if ('outboxes' in entry) throw new OutboxError('CONFIG_FILE_INVALID', `outboxes.${name}.outboxes in ${where}: outboxes do not nest; move it to the top level.`);
  }
  return entries as Array<[string, Tree]>;
}

/** `OUTBOX__BILLING__` for `billing`, `OUTBOX__TENANT_A__` for `tenant-a`. */
export const outboxEnvPrefix = (name: string): string => `OUTBOX__${name.toUpperCase().replace(/-/g, '_')}__`;

/** The variables of one outbox, with its prefix taken off (`OUTBOX__BILLING__PGHOST` → `PGHOST`). */
export function outboxEnv(env: NodeJS.ProcessEnv, name: string): NodeJS.ProcessEnv {
  const prefix = outboxEnvPrefix(name);
  const own: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(env)) if (key.startsWith(prefix)) own[key.slice(prefix.length)] = value;
  return own;
}

const server = (c: OutboxConfig) => `${c.database.host}:${c.database.port}`;
const database = (c: OutboxConfig) => `${server(c)}/${c.database.database}`;

/**
 * What two outboxes must not share: a connector name on one Connect cluster, a topic prefix or routed
 * topics (their partition records and `topics:grow` would fight), a slot on one server, and the outbox
 * table or publication in one database. Every clash is listed in one CONFIG_INVALID.
 */
export function assertDistinctOutboxes(outboxes: readonly NamedOutbox[]): void {
  const keys: Array<[string, (c: OutboxConfig) => string, string]> = [
    ['connector.name', (c) => `${c.connect.url} ${c.connector.name}`, 'Connect keeps one connector per name'],
    ['connector.topicPrefix', (c) => `${c.connect.url} ${c.connector.topicPrefix}`, "Debezium's topic.prefix names the connector's heartbeat topic and must be unique per Connect cluster"],
    ['connector.topicReplacement', (c) => c.connector.topicReplacement, 'each outbox routes to topics of its own'],
    ['connector.slotName', (c) => `${server(c)} ${c.connector.slotName}`, 'a replication slot belongs to one connector'],
    ['outbox.table', (c) => `${database(c)} ${c.outbox.schema}.${c.outbox.table}`, 'that is one outbox table'],
    ['outbox.publication', (c) => `${database(c)} ${c.outbox.publication}`, 'a publication belongs to one outbox'],
  ];
  const problems: string[] = [];
  for (const [setting, key, why] of keys) {
    const seen = new Map<string, string>();
    for (const { name, config } of outboxes) {
      const k = key(config);
      const other = seen.get(k);
      if (other) problems.push(`outboxes.${name}.${setting}: the same as outboxes.${other}'s (${k.split(' ').pop() ?? k}); ${why}. Give each outbox its own.`);
      else seen.set(k, name);
    }
  }
  if (problems.length > 0) {
    throw new OutboxError('CONFIG_INVALID', `Invalid configuration; nothing was changed:\n${problems.map((p) => `  - ${p}`).join('\n')}`, { details: { fields: problems.map((p) => p.split(':')[0]) } });
  }
}

/**
 * The outboxes `--outbox` names (a comma list), in the configuration's order; all of them without it.
 * Without an `outboxes` section the shared configuration is the one outbox, named "".
 */
export function selectOutboxes(loaded: { config: OutboxConfig; sources: ReadonlyMap<string, ConfigSource>; outboxes: readonly NamedOutbox[] }, names: readonly string[] | undefined): NamedOutbox[] {
  if (loaded.outboxes.length === 0) {
    if (names && names.length > 0) {
      throw new OutboxError('FLAG_INVALID', `--outbox ${names.join(',')}: the configuration has no outboxes section, so there is one outbox and nothing to choose. Leave --outbox out, or describe the outboxes in the --config file (docs/multi-outbox.md).`, { details: { flag: '--outbox', value: names.join(',') } });
    }
    return [{ name: '', config: loaded.config, sources: loaded.sources }];
  }
  if (!names || names.length === 0) return [...loaded.outboxes];
  const known = loaded.outboxes.map((o) => o.name);
  const unknown = names.filter((n) => !known.includes(n));
  if (unknown.length > 0) {
    throw new OutboxError('FLAG_INVALID', `--outbox ${unknown.join(',')}: no such outbox; the configuration has ${known.join(', ')}.`, { details: { flag: '--outbox', value: unknown.join(',') } });
  }
  return loaded.outboxes.filter((o) => names.includes(o.name));
}
