/**
 * A private Docker engine for one run: `dockerd` with its own data root, exec root, pid file and unix
 * socket under a temporary folder, so it never meets another engine on the machine. This machine has no
 * iptables and no registry access: overlay2 storage where the kernel allows it (else vfs), no bridge
 * network (containers run with `--network host`),
 * images built from local bases only (./base-image.ts).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { OutboxError } from 'outbox-router/errors';
import { aptCommand, aptInstall } from '../stack/apt-install';
import { run, spawnDetached, stopProcess, tailLines, which } from '../stack/processes';

export interface DockerEngine {
  /** `unix:///…/docker.sock`: the DOCKER_HOST of every docker command of this run. */
  host: string;
  dir: string;
  logFile: string;
  pid: number;
  /** SIGTERM to dockerd (it stops its containers and its containerd), then the folder is removed. */
  stop(): Promise<void>;
}

/** The environment a `docker` command of this engine runs with (the legacy builder: BuildKit would pull its frontend). */
export function dockerEnv(host: string): NodeJS.ProcessEnv {
  return { ...process.env, DOCKER_HOST: host, DOCKER_BUILDKIT: '0', DOCKER_CLI_HINTS: 'false' };
}

/** Installs `packages` with apt-get when `command` is missing; says which command to run when it cannot. */
export function ensureCommand(command: string, packages: readonly string[], log: (line: string) => void): void {
  if (which(command)) return;
  log(`${command} is missing: apt-get install ${packages.join(' ')}`);
  const outcome = aptInstall(packages);
  if (!outcome.ok || !which(command)) {
    const why = outcome.ok ? `${command} is still not on PATH` : outcome.reason === 'failed' ? outcome.output : outcome.reason;
    throw new OutboxError('STACK_SERVICE_FAILED', `${command} is needed and could not be installed (${why}). Run as root: ${aptCommand(packages)}`);
  }
}

/** Mount points under `dir`, deepest first (from /proc/mounts). */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[1] ?? '')
    .filter((point) => point === dir || point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

/**
 * overlay2 when this kernel lets us mount an overlay file system in `dir` (it does here: the data root is on
 * ext4), else vfs, which works everywhere but copies the whole file system for every layer: on this
 * machine the Dockerfile's build stage took minutes per step on vfs (2026-12-06).
 */
export function storageDriver(dir: string): 'overlay2' | 'vfs' {
  const probe = join(dir, 'overlay-probe');
  const [lower, upper, work, merged] = ['lower', 'upper', 'work', 'merged'].map((d) => join(probe, d)) as [string, string, string, string];
  for (const d of [lower, upper, work, merged]) mkdirSync(d, { recursive: true });
  const mounted = run('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${lower},upperdir=${upper},workdir=${work}`, merged]).status === 0;
  if (mounted) run('umount', [merged]);
  rmSync(probe, { recursive: true, force: true });
  return mounted ? 'overlay2' : 'vfs';
}

export async function startEngine(log: (line: string) => void, options: { storageDriver?: 'overlay2' | 'vfs' | 'auto'; timeoutMs?: number } = {}): Promise<DockerEngine> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  ensureCommand('dockerd', ['docker.io'], log);
  const dir = mkdtempSync(join(tmpdir(), 'outbox-docker-'));
  const driver = !options.storageDriver || options.storageDriver === 'auto' ? storageDriver(dir) : options.storageDriver;
  const socket = join(dir, 'docker.sock');
  const host = `unix://${socket}`;
  const logFile = join(dir, 'dockerd.log');
  const pid = spawnDetached({
    command: 'dockerd',
    args: [
      `--storage-driver=${driver}`,
      '--iptables=false',
      '--ip-masq=false',
      '--bridge=none',
      `--data-root=${join(dir, 'data')}`,
      `--exec-root=${join(dir, 'exec')}`,
      `--pidfile=${join(dir, 'dockerd.pid')}`,
      `--host=${host}`,
    ],
    logFile,
    pidFile: join(dir, 'launcher.pid'),
  });
  const engine: DockerEngine = {
    host,
    dir,
    logFile,
    pid,
    async stop() {
      await stopProcess(pid, 30_000);
      // dockerd leaves mounts under its folders (the default network namespace, the data root on overlay2).
      for (const mount of mountsUnder(dir)) run('umount', ['-l', mount]);
      // rm, not rmSync: an engine's data root holds hundreds of thousands of files (node_modules, per layer).
      run('rm', ['-rf', dir]);
    },
  };
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const probe = run('docker', ['version', '--format', '{{.Server.Version}}'], { env: dockerEnv(host) });
    if (probe.status === 0) {
      log(`dockerd ${probe.output.trim()} (pid ${pid}, storage ${driver}) on ${host}`);
      return engine;
    }
    if (Date.now() > deadline) {
      const tail = tailLines(logFile, 10).join('\n');
      await engine.stop();
      throw new OutboxError('STACK_SERVICE_FAILED', `dockerd did not answer on ${host} within ${timeoutMs / 1000} s. Its log ends with:\n${tail}\nIt must run as root; check that no other engine uses the same folders.`);
    }
    await sleep(250);
  }
}
