/**
 * A private Docker engine for one run: `dockerd` with its own data root, exec root, pid file and unix
 * socket under a temporary folder, so it never meets another engine on the machine. This machine has no
 * iptables and no registry access: vfs storage, no bridge network (containers run with `--network host`),
 * images built from local bases only (./base-image.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
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

export async function startEngine(log: (line: string) => void, timeoutMs = 60_000): Promise<DockerEngine> {
  ensureCommand('dockerd', ['docker.io'], log);
  const dir = mkdtempSync(join(tmpdir(), 'outbox-docker-'));
  const socket = join(dir, 'docker.sock');
  const host = `unix://${socket}`;
  const logFile = join(dir, 'dockerd.log');
  const pid = spawnDetached({
    command: 'dockerd',
    args: [
      '--storage-driver=vfs',
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
      rmSync(dir, { recursive: true, force: true });
    },
  };
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const probe = run('docker', ['version', '--format', '{{.Server.Version}}'], { env: dockerEnv(host) });
    if (probe.status === 0) {
      log(`dockerd ${probe.output.trim()} (pid ${pid}) on ${host}`);
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
