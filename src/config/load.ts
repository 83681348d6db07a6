import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { OutboxError } from '../errors';
import { ENV_SETTINGS, envForm, envValue } from './env';
import { parse } from './parse';
import { redactConfig, withoutUserinfo } from './redact';
import { assertDistinctOutboxes, outboxEntries, outboxEnv, outboxEnvPrefix, type NamedOutbox } from './outboxes';
import { outboxConfigSchema, type OutboxConfig, type OutboxOptions } from './schema';

/** What set a setting: its schema default, an env var, the config file, a command-line flag, or code. */
export type ConfigSource = { kind: 'default' } | { kind: 'env'; name: string } | { kind: 'file'; path: string } | { kind: 'flag'; name: string } | { kind: 'option' };

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
  /**
   * The file's `outboxes` section, each entry resolved over the shared settings (docs/multi-outbox.md),
   * in the file's order; empty without one. `config` is then the shared settings alone.
   */
  outboxes: readonly NamedOutbox[];
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
  let parsed: unknown;
  try {
    parsed = parseYaml(text);
  } catch (error) {
    // No cause: the parser's error (its message and stack, which --log-level debug would print) quotes
    // the offending line, and a line of a config file may well hold a password.
    throw new OutboxError('CONFIG_FILE_INVALID', `The config file ${path} is not valid JSON or YAML: ${syntaxErrorText(error)}. Fix the syntax there.`);
  }
  if (parsed === null || parsed === undefined) return {};
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new OutboxError('CONFIG_FILE_INVALID', `The config file ${path} is not valid JSON or YAML: the top level must be a mapping of sections (database, outbox, connector, …).`);
  }
  return parsed as Tree;
}

/**
 * The parser's reason and position without the content: the yaml library appends a code frame (the
 * offending line and a caret) to its message, cut here at the position it names.
 */
function syntaxErrorText(error: unknown): string {
  const { message, code, linePos } = error as { message?: unknown; code?: unknown; linePos?: ReadonlyArray<{ line: number; col: number }> };
  const text = typeof message === 'string' ? message : String(error);
  const position = linePos?.[0] ? ` at line ${linePos[0].line}, column ${linePos[0].col}` : '';
  const cut = text.search(/ at line \d+, column \d+/);
  const reason = (cut >= 0 ? text.slice(0, cut) : text.split('\n')[0]!).trim();
  return `${reason}${typeof code === 'string' ? ` (${code})` : ''}${position}`;
}

/**
 * What set the value at a dotted path: its own source, or else the nearest enclosing setting's (an entry
 * of a record set whole from one variable, `router.policies.order` from OUTBOX_ROUTER_POLICIES).
 */
export function sourceAt(sources: ReadonlyMap<string, ConfigSource>, path: string): ConfigSource | undefined {
  const keys = path.split('.');
  for (let n = keys.length; n > 0; n--) {
    const source = sources.get(keys.slice(0, n).join('.'));
    if (source) return source;
  }
  return undefined;
}

/**
 * Resolves the configuration once: schema defaults < file < environment < overrides. Every invalid
 * field is reported in one error, with where it came from; secret values are never echoed.
 */
export function loadConfig(options: LoadConfigOptions = {}): OutboxConfig {
  return loadConfigWithSources(options).config;
}

/** loadConfig, also telling what set each value (`outbox config print`), and each outbox of an `outboxes` section. */
export function loadConfigWithSources(options: LoadConfigOptions = {}): LoadedConfig {
  const env = options.env ?? process.env;
  const fromFile = options.file ? readConfigFile(options.file) : {};
  const { outboxes: entries, ...fileBase } = fromFile;
  const named = outboxEntries(entries, options.file);
  const fileSources = new Map<string, ConfigSource>();
  if (options.file) markLeaves(fileBase, [], fileSources, () => ({ kind: 'file', path: options.file as string }));
  const envBase = envLayer(env, (name) => name);
  const flags = flagLayer(options);

  // The shared settings, then each outbox's: its file entry and its own variables over the shared ones.
  const layers: Layer[] = [{ tree: fileBase, sources: fileSources }, envBase, flags];
  const base = resolve(layers, 'Invalid configuration; nothing was changed');
  const outboxes = named.map(([name, entry]) => {
    const entrySources = new Map<string, ConfigSource>();
    markLeaves(entry, [], entrySources, () => ({ kind: 'file', path: `${options.file as string}, outboxes.${name}` }));
    const own = envLayer(outboxEnv(env, name), (variable) => `${outboxEnvPrefix(name)}${variable}`);
    const resolved = resolve([layers[0]!, envBase, { tree: entry, sources: entrySources }, own, flags], `Invalid configuration of outbox "${name}" (outboxes.${name}); nothing was changed`);
    return { name, ...resolved };
  });
  assertDistinctOutboxes(outboxes);
  return { ...base, outboxes };
}

/** One source of settings: its tree, what set each leaf, and (from variables) the hints and whole records. */
interface Layer {
  tree: Tree;
  sources: ReadonlyMap<string, ConfigSource>;
  forms?: ReadonlyMap<string, string>;
  wholes?: ReadonlyArray<{ path: readonly string[]; value: unknown }>;
}

function markLeaves(node: Tree, prefix: string[], sources: Map<string, ConfigSource>, source: (path: string) => ConfigSource): void {
  for (const [k, v] of Object.entries(node)) {
    if (v === undefined) continue;
    const p = [...prefix, k];
    if (v && typeof v === 'object' && !Array.isArray(v)) markLeaves(v as Tree, p, sources, source);
    else sources.set(p.join('.'), source(p.join('.')));
  }
}

/** The environment's settings; `variableName` names the variable as the user set it (an outbox's own prefix). */
function envLayer(env: NodeJS.ProcessEnv, variableName: (variable: string) => string): Layer {
  const tree: Tree = {};
  const sources = new Map<string, ConfigSource>();
  const forms = new Map<string, string>();
  const wholes: Array<{ path: readonly string[]; value: unknown }> = [];
  for (const setting of ENV_SETTINGS) {
    const fromFile = secretFromFile(setting, env, variableName);
    const raw = fromFile?.value ?? env[setting.env];
    if (raw === undefined || raw === '') continue;
    const value = envValue(setting, raw);
    setPath(tree, setting.path, value);
    const name = fromFile?.variable ?? variableName(setting.env);
    sources.set(setting.path.join('.'), { kind: 'env', name });
    const form = envForm(setting);
    if (form) forms.set(name, `${name} takes ${form}`);
    // A record from a variable replaces the record below it whole: the variable is the setting.
    if (setting.type === 'json') wholes.push({ path: setting.path, value });
  }
  return { tree, sources, forms, wholes };
}

function flagLayer(options: LoadConfigOptions): Layer {
  const tree = (options.overrides ?? {}) as Tree;
  const sources = new Map<string, ConfigSource>();
  markLeaves(tree, [], sources, (path) => {
    const flag = options.flagNames?.[path];
    return flag ? { kind: 'flag', name: flag } : { kind: 'option' };
  });
  return { tree, sources };
}

/** Merges the layers in order (later wins), then validates once, naming each bad field's source. */
function resolve(layers: readonly Layer[], heading: string): { config: OutboxConfig; sources: ReadonlyMap<string, ConfigSource> } {
  let tree: Tree = {};
  const sources = new Map<string, ConfigSource>();
  const forms = new Map<string, string>();
  for (const layer of layers) {
    tree = deepMerge(tree, layer.tree);
    for (const { path, value } of layer.wholes ?? []) {
      setPath(tree, path, value);
      const dotted = path.join('.');
      for (const key of [...sources.keys()]) if (key.startsWith(`${dotted}.`)) sources.delete(key);
    }
    for (const [path, source] of layer.sources) sources.set(path, source);
    for (const [name, form] of layer.forms ?? []) forms.set(name, form);
  }
  const where = (path: string): string => {
    const source = sourceAt(sources, path);
    return source?.kind === 'env' ? ` (from ${source.name})` : source?.kind === 'file' ? ` (in ${source.path})` : source?.kind === 'flag' ? ` (from ${source.name})` : '';
  };
  // A bad value from a variable also says what the variable takes ("OUTBOX_DB_SSL takes 1/true/yes/on or …").
  const hint = (path: string): string => {
    const source = sourceAt(sources, path);
    return source?.kind === 'env' ? (forms.get(source.name) ?? '') : '';
  };
  const config = parse(outboxConfigSchema, tree, { heading, origin: where, hint });
  return { config: deepFreeze(config), sources };
}

export { ENV_SETTINGS, redactConfig, withoutUserinfo };

/** A secret setting: its value may come from a file named by `<VARIABLE>_FILE` instead. */
const SECRET_LEAF = /(password|secret|token)$/i;

/**
 * `<VARIABLE>_FILE` for a secret's variable (OUTBOX_KAFKA_SASL_PASSWORD_FILE, PGPASSWORD_FILE, …): the
 * file's content is the value, without one trailing newline, as Docker and Kubernetes mount secrets.
 * Setting both is refused, and an unreadable file named; the content is never echoed.
 */
function secretFromFile(setting: { env: string; path: readonly string[] }, env: NodeJS.ProcessEnv, variableName: (variable: string) => string): { value: string; variable: string } | undefined {
  const variable = variableName(`${setting.env}_FILE`);
  const path = env[`${setting.env}_FILE`];
  if (!path || !SECRET_LEAF.test(setting.path[setting.path.length - 1] ?? '')) return undefined;
  if (env[setting.env]) {
    throw new OutboxError('CONFIG_INVALID', `Both ${variableName(setting.env)} and ${variable} are set: the secret ${setting.path.join('.')} must come from one place. Unset one of them.`, { details: { variables: [variableName(setting.env), variable] } });
  }
  try {
    return { value: readFileSync(path, 'utf8').replace(/\r?\n$/, ''), variable };
  } catch (error) {
    throw new OutboxError('CONFIG_INVALID', `Cannot read ${variable} ${path}: ${(error as Error).message}. Point ${variable} at a readable file holding only the secret.`, { cause: error, details: { variable, path } });
  }
}

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
