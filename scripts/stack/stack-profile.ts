import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { StackConfig } from './config';
import type { StackPaths } from './paths';
import { DEFAULT_STACK_PROFILE, STACK_PROFILES, type StackProfile } from './settings';

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
