import type { Command } from 'commander';
import { loadConfig, type OutboxConfig } from '../config';

/** `--config <file>`: a JSON or YAML file of settings; env vars and flags override it. */
export function withConfigOption(command: Command): Command {
  return command.option('-c, --config <file>', 'settings file (JSON or YAML); env vars override it (see docs/configuration.md)');
}

export function configFrom(command: Command): OutboxConfig {
  const { config } = command.optsWithGlobals<{ config?: string }>();
  return loadConfig({ file: config });
}
