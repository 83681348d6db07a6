import { run as runCommand, which as whichCommand, type RunResult } from './processes';

/** What aptInstall touches on the machine; replaced by fakes in unit tests. */
export interface AptDeps {
  run?: (command: string, args: readonly string[], options: { env: NodeJS.ProcessEnv }) => RunResult;
  which?: (command: string) => string | undefined;
  isRoot?: () => boolean;
}

export type AptOutcome =
  | { ok: true }
  /** not-root / no-apt: nothing was run; failed: `output` holds apt-get's last lines. */
  | { ok: false; reason: 'not-root' | 'no-apt' | 'failed'; output: string };

/**
 * `apt-get update` then `apt-get install -y <packages>` from Debian's own packages, non-interactively.
 * Only as root on a machine with apt-get: anything else is reported, never attempted (no sudo), so the
 * caller can say which command to run by hand. `recommends: false` leaves out recommended packages (for
 * prometheus: node-exporter and smartmontools, services that would start on their own).
 */
export function aptInstall(packages: readonly string[], deps: AptDeps = {}, options: { recommends?: boolean } = {}): AptOutcome {
  const run = deps.run ?? runCommand;
  const which = deps.which ?? whichCommand;
  const isRoot = deps.isRoot ?? (() => process.getuid?.() === 0);
  if (!isRoot()) return { ok: false, reason: 'not-root', output: '' };
  if (!which('apt-get')) return { ok: false, reason: 'no-apt', output: '' };
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const update = run('apt-get', ['update', '-q'], { env });
  const install = update.status === 0 ? run('apt-get', ['install', '-y', '-q', ...(options.recommends === false ? ['--no-install-recommends'] : []), ...packages], { env }) : update;
  if (install.status === 0) return { ok: true };
  return { ok: false, reason: 'failed', output: install.output.trim().split('\n').slice(-8).join('\n') };
}

/** The command a person runs when aptInstall could not: for error messages. */
export const aptCommand = (packages: readonly string[]): string => `apt-get update && apt-get install -y ${packages.join(' ')}`;
