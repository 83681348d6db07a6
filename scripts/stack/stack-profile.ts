import { CLUSTER_POSTGRES_NAMES } from './cluster-postgres';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { OutboxError } from 'outbox-router/errors';
import type { StackConfig } from './config';
import type { StackPaths } from './paths';
import * as pg from './postgres';
import { jvmLayout, type ServiceName } from './services';
import { DEFAULT_STACK_PROFILE, STACK_PROFILES, type StackProfile } from './settings';
import { runningPid } from './start-up';

/**
 * The profile a stack was started with, as `stack up` recorded it in the state folder; undefined for a
 * stack never started (or started before profiles existed: that one ran the single profile).
 */
export function recordedProfile(paths: Pick<StackPaths, 'profileFile'>): StackProfile | undefined {
  if (!existsSync(paths.profileFile)) return undefined;
  const text = readFileSync(paths.profileFile, 'utf8').trim();
  return (STACK_PROFILES as readonly string[]).includes(text) ? (text as StackProfile) : undefined;
}

/**
 * The profile every command acts on: the one asked for (--profile, OUTBOX_STACK_PROFILE), else the
 * recorded one, else `single`. Sticky like exactlyOnceSource, so the chaos harness's `up()` and
 * `stopService()`, and a plain `stack status` or `stack down`, act on the cluster the user started.
 */
export function effectiveProfile(config: Pick<StackConfig, 'profile'>, paths: Pick<StackPaths, 'profileFile'>): StackProfile {
  return config.profile ?? recordedProfile(paths) ?? DEFAULT_STACK_PROFILE;
}

export function recordProfile(paths: Pick<StackPaths, 'profileFile'>, profile: StackProfile): void {
  mkdirSync(dirname(paths.profileFile), { recursive: true });
  writeFileSync(paths.profileFile, `${profile}\n`);
}

/** A profile's services in `stack status` order: PostgreSQL, the brokers, the registry, the workers. */
export function serviceNames(profile: StackProfile): ServiceName[] {
  return ['postgres', ...(profile === 'cluster' ? CLUSTER_POSTGRES_NAMES : []), ...jvmLayout(profile, { configDir: '' }).map((s) => s.name)];
}

/** The services a name stands for in a profile (Stack.resolveServices). */
export function servicesNamed(profile: StackProfile, name: ServiceName): ServiceName[] {
  const names = serviceNames(profile);
  if (names.includes(name)) return [name];
  const group = jvmLayout(profile, { configDir: '' }).filter((s) => s.group === name).map((s) => s.name);
  if (group.length > 0) return group;
  throw new OutboxError(
    'STACK_PROFILE_MISMATCH',
    `The stack runs the ${profile} profile, which has no service "${name}"; its services are ${names.join(', ')}` +
      `${profile === 'cluster' ? ' (kafka and connect stand for all brokers or all workers)' : ''}. ` +
      'Name one of those, or start the other profile: `stack down --clean`, then `stack up --profile <single|cluster>`.',
    { details: { profile, service: name } },
  );
}

/**
 * Refuses to start one profile while the other runs: their brokers share ports and their Connect
 * workers would join different clusters under one state folder. A stopped stack may switch.
 */
export function assertProfileSwitchable(paths: StackPaths, profile: StackProfile): void {
  const running = recordedProfile(paths) ?? DEFAULT_STACK_PROFILE;
  if (running === profile) return;
  const alive: ServiceName[] = jvmLayout(running, paths).filter((s) => runningPid(paths, s.name) !== undefined).map((s) => s.name);
  const install = pg.findPostgres();
  const layout = existsSync(join(paths.stateDir, 'postgres-root')) ? pg.postgresLayout(paths) : undefined;
  if (install && layout && pg.postgresRunning(install, layout)) alive.unshift('postgres');
  if (alive.length === 0) return;
  throw new OutboxError(
    'STACK_PROFILE_MISMATCH',
    `The stack in ${paths.stateDir} runs the ${running} profile (${alive.join(', ')} up); refusing to start the ${profile} profile over it. ` +
      `Stop it first with \`stack down --clean\` (or plain \`stack down\` to keep PostgreSQL's data), then \`stack up --profile ${profile}\`; ` +
      `or keep using it without --profile (and without OUTBOX_STACK_PROFILE=${profile}).`,
    { details: { running, asked: profile, services: alive } },
  );
}
