import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { STACK_VERSIONS } from './settings';

import { PACKAGE_ROOT } from 'outbox-router/assets';

/** The repository's root (the package root). */
export const PROJECT_ROOT = PACKAGE_ROOT;

export interface StackPaths {
  /** Per-checkout state: rendered configs, data, logs, pid files. Ignored by git. */
  stateDir: string;
  configDir: string;
  logDir: string;
  pidDir: string;
  kafkaDataDir: string;
  /** The profile the stack was started with (stack-profile.ts); gone after `stack down --clean`. */
  profileFile: string;
  /** Shared between checkouts and runs: downloaded jars, keyed by version. */
  cacheDir: string;
  kafkaLibDir: string;
  pluginPath: string;
  debeziumPluginDir: string;
  registryDir: string;
  /** The secure profile's Connect REST basic-auth extension jar. */
  connectBasicAuthDir: string;
  connectTemplates: string;
}

export function stackPaths(stateDir: string, cacheDir: string): StackPaths {
  const state = resolve(stateDir);
  const cache = resolve(cacheDir);
  const pluginPath = join(cache, `connect-plugins-${STACK_VERSIONS.debezium}`);
  return Object.freeze({
    stateDir: state,
    configDir: join(state, 'config'),
    logDir: join(state, 'logs'),
    pidDir: join(state, 'pids'),
    kafkaDataDir: join(state, 'kafka-data'),
    profileFile: join(state, 'profile'),
    cacheDir: cache,
    kafkaLibDir: join(cache, `kafka-${STACK_VERSIONS.kafka}-lib`),
    pluginPath,
    debeziumPluginDir: join(pluginPath, 'debezium-connector-postgres'),
    registryDir: join(cache, `apicurio-registry-${STACK_VERSIONS.apicurio}`),
    connectBasicAuthDir: join(cache, `connect-basic-auth-${STACK_VERSIONS.kafka}`),
    connectTemplates: join(PROJECT_ROOT, 'connect'),
  });
}

/** A cluster-profile broker's log.dirs (kafka-1-data, …), beside the single broker's kafka-data. */
export function kafkaNodeDataDir(paths: Pick<StackPaths, 'stateDir'>, node: string): string {
  return join(paths.stateDir, `${node}-data`);
}

export function defaultStateDir(): string {
  return process.env.OUTBOX_STACK_DIR || join(PROJECT_ROOT, '.stack');
}

export function defaultCacheDir(): string {
  return process.env.OUTBOX_CACHE_DIR || join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'outbox-router');
}
