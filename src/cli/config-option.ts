import type { Command } from 'commander';
import { loadConfig, loadConfigWithSources, outboxConfigSchema, type LoadedConfig, type OutboxConfig } from '../config';
import { OutboxError } from '../errors';

/** `--config <file>`: a JSON or YAML file of settings; env vars and flags override it. */
export function withConfigOption(command: Command): Command {
  return command.option('-c, --config <file>', 'settings file (JSON or YAML); env vars override it (see docs/configuration.md)');
}

export function configFrom(command: Command): OutboxConfig {
  const { config } = command.optsWithGlobals<{ config?: string }>();
  return loadConfig({ file: config });
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
export function loadCommandConfig(command: Command, settings: readonly FlagSetting[]): LoadedConfig {
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
