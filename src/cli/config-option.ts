import type { Command } from 'commander';
import { loadConfigWithSources, outboxConfigSchema, selectOutboxes, type LoadedConfig, type NamedOutbox, type OutboxConfig } from '../config';
import { OutboxError } from '../errors';

/** `--config <file>`: a JSON or YAML file of settings; env vars and flags override it. */
export function withConfigOption(command: Command): Command {
  return command.option('-c, --config <file>', 'settings file (JSON or YAML); env vars override it (see docs/configuration.md)');
}

/** How a command treats an `outboxes` section: it acts on one outbox, or on the shared (router's) settings. */
export type OutboxScope = 'outbox' | 'shared';

/**
 * The configuration a command acts on: the shared settings, or with `--outbox <name>` that outbox's. A
 * command on an outbox's tables, slot or connector (`scope` 'outbox') refuses to guess when the file
 * describes several and none is named.
 */
export function configFrom(command: Command, scope: OutboxScope = 'shared'): OutboxConfig {
  return loadCommandConfig(command, [], scope).config;
}

/** `--outbox a,b` (the program's option) as names; undefined without it. */
export function outboxNames(command: Command): string[] | undefined {
  const { outbox } = command.optsWithGlobals<{ outbox?: string }>();
  if (outbox === undefined) return undefined;
  const names = outbox.split(',').map((n) => n.trim()).filter(Boolean);
  if (names.length === 0) throw new OutboxError('FLAG_INVALID', `--outbox ${JSON.stringify(outbox)} names no outbox; pass a name, or a comma list (--outbox billing,orders).`, { details: { flag: '--outbox', value: outbox } });
  return names;
}

/** A command-line flag that sets one setting of OutboxConfig. */
export interface FlagSetting {
  /** As written: `--max-attempts`. */
  flag: string;
  /** The setting's dotted path: `router.maxAttempts`. */
  path: string;
  /** Turns the flag's value into the setting's (and refuses a bad one, naming the flag); default: as given. */
  parse?: (value: never, flag: string) => unknown;
}

/** `--max-attempts` → `maxAttempts`, the key commander stores the value under. */
const optionKey = (flag: string) => flag.replace(/^--/, '').replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

/** The settings the given flags set, as config overrides, and the flag behind each path. */
export function flagOverrides(settings: readonly FlagSetting[], values: Record<string, unknown>): { overrides: Record<string, unknown>; flagNames: Record<string, string> } {
  const overrides: Record<string, unknown> = {};
  const flagNames: Record<string, string> = {};
  for (const { flag, path, parse } of settings) {
    const raw = values[optionKey(flag)];
    if (raw === undefined) continue;
    const keys = path.split('.');
    let node = overrides;
    for (const key of keys.slice(0, -1)) node = (node[key] ??= {}) as Record<string, unknown>;
    node[keys[keys.length - 1] as string] = parse ? parse(raw as never, flag) : raw;
    flagNames[path] = flag;
  }
  return { overrides, flagNames };
}

/**
 * The one path from flags to config for the service commands: the `--config` file, the environment and
 * the flags of `settings` (each mapped onto its setting), resolved and validated once.
 */
export function loadCommandConfig(command: Command, settings: readonly FlagSetting[], scope: OutboxScope = 'shared', options: { ignoreOutbox?: boolean } = {}): LoadedConfig {
  const loaded = loadAll(command, settings);
  const names = options.ignoreOutbox ? undefined : outboxNames(command);
  if (names === undefined) {
    if (scope === 'outbox' && loaded.outboxes.length > 0) {
      throw new OutboxError('FLAG_INVALID', `The configuration describes ${loaded.outboxes.length} outboxes (${loaded.outboxes.map((o) => o.name).join(', ')}): name the one for ${command.name()} with --outbox <name>.`, { details: { flag: '--outbox' } });
    }
    return loaded;
  }
  if (names.length > 1) throw new OutboxError('FLAG_INVALID', `${command.name()} acts on one outbox; --outbox ${names.join(',')} names ${names.length}. Run it once for each.`, { details: { flag: '--outbox', value: names.join(',') } });
  const [chosen] = selectOutboxes(loaded, names) as [NamedOutbox];
  return { config: chosen.config, sources: chosen.sources, outboxes: loaded.outboxes };
}

/**
 * The outboxes a command that handles several acts on: those `--outbox` names, else every one of the
 * `outboxes` section, else the one the shared settings describe (named "").
 */
export function loadCommandOutboxes(command: Command, settings: readonly FlagSetting[]): NamedOutbox[] {
  return selectOutboxes(loadAll(command, settings), outboxNames(command));
}

function loadAll(command: Command, settings: readonly FlagSetting[]): LoadedConfig {
  const values = command.optsWithGlobals<Record<string, unknown>>();
  const { overrides, flagNames } = flagOverrides(settings, values);
  return loadConfigWithSources({ file: values.config as string | undefined, overrides, flagNames });
}

/** A whole number ≥ `min` from a flag, or FLAG_INVALID naming the flag. */
export function wholeNumber(min: number, example?: string): (value: string, flag: string) => number {
  return (value, flag) => {
    const text = String(value).trim();
    if (!/^\d+$/.test(text)) {
      throw new OutboxError('FLAG_INVALID', `${flag} ${JSON.stringify(value)} is not a whole number; pass ${example ?? `a whole number from ${min}`}.`, { details: { flag, value } });
    }
    const n = Number(text);
    if (n < min) throw new OutboxError('FLAG_INVALID', `${flag} must be at least ${min}, got ${text}.`, { details: { flag, value } });
    return n;
  };
}

let defaults: Record<string, unknown> | undefined;

/** A setting's schema default as help text shows it: `(default: router.lanes, 1)`. */
export function defaultOf(path: string, shown?: string): string {
  defaults ??= outboxConfigSchema.parse({}) as Record<string, unknown>;
  const value = path.split('.').reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], defaults);
  return `(default: ${path}${value === undefined && shown === undefined ? '' : `, ${shown ?? JSON.stringify(value).replace(/^"|"$/g, '')}`})`;
}
