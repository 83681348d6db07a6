import { setTimeout as sleep } from 'node:timers/promises';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import axios from 'axios';
import { aptCommand, aptInstall, type AptDeps } from '../../scripts/stack/apt-install';
import { run as runCommand, which as whichCommand } from '../../scripts/stack/processes';

/** A server binary the tests take from Debian's packages (Alertmanager, Prometheus). */
export interface DebianServer {
  /** As error messages name it. */
  name: string;
  package: string;
  /** Where the package puts the binary. */
  debianBinary: string;
  /** The environment variable that names another binary instead. */
  env: string;
  /** Services the package starts where an init system lets it: stopped right after the install. */
  services: readonly string[];
  /** Whether to install the package's recommendations too (default yes). */
  recommends?: boolean;
}

export type EnsureDeps = AptDeps & { exists?: (path: string) => boolean };

/**
 * The server's binary, installed from Debian's packages when it is missing (as the stack installs
 * PostgreSQL), so `npm test` needs no extra step on a fresh machine. A binary named by the environment
 * variable is never installed over: apt-get could not put it there. The tests start their own server on a
 * free port with a temp dir, so a packaged service started by the install (on its default port, with
 * its default storage) is stopped at once.
 */
export function ensureDebianBinary(server: DebianServer, binary: string, deps: EnsureDeps = {}): string {
  const exists = deps.exists ?? existsSync;
  if (exists(binary)) return binary;
  const fix = `Install it with \`${aptCommand([server.package])}\` (Debian/Ubuntu), or set ${server.env} to an ${server.name} binary.`;
  if (binary !== server.debianBinary) throw new Error(`${server.name} not found at ${binary} (${server.env}). ${fix}`);
  const outcome = aptInstall([server.package], deps, { recommends: server.recommends });
  if (!outcome.ok) {
    const why = {
      'not-root': 'the tests do not run as root, so they cannot install it',
      'no-apt': 'this machine has no apt-get to install it with',
      failed: `apt-get failed:\n${outcome.output}\n`,
    }[outcome.reason];
    throw new Error(`${server.name} not found at ${binary} and ${why}. ${fix}`);
  }
  stopPackagedServices(server.services, deps);
  if (!exists(binary)) throw new Error(`apt-get installed ${server.package}, but ${binary} is still missing. ${fix}`);
  return binary;
}

/** `invoke-rc.d <service> stop` (systemd or sysvinit alike); a refusal (no init, policy-rc.d) is fine. */
function stopPackagedServices(services: readonly string[], deps: AptDeps): void {
  const run = deps.run ?? runCommand;
  const which = deps.which ?? whichCommand;
  if (!which('invoke-rc.d')) return;
  for (const service of services) run('invoke-rc.d', [service, 'stop'], { env: process.env });
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface LocalServer {
  url: string;
  /** Its temp dir (configuration and storage), removed by stop(). */
  dir: string;
  stop(): Promise<void>;
}

/**
 * A server process on a free local port with everything in a temp dir: `files` are written there first,
 * `args` get the dir and the port. Ready when `readyPath` answers 200; `stop()` kills it and removes
 * the dir.
 */
export async function startLocalServer(options: { name: string; binary: string; files?: Record<string, string>; args: (dir: string, port: number) => string[]; readyPath: string; timeoutMs?: number }): Promise<LocalServer> {
  const dir = mkdtempSync(join(tmpdir(), 'outbox-server-'));
  for (const [file, text] of Object.entries(options.files ?? {})) writeFileSync(join(dir, file), text);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(options.binary, options.args(dir, port), { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`${options.name} exited at start-up (code ${child.exitCode}): ${stderr}`);
    }
    const ready = await axios.get(`${url}${options.readyPath}`, { timeout: 1_000, validateStatus: () => true }).then((r) => r.status === 200, () => false);
    if (ready) return { url, dir, stop };
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${options.name} did not become ready on ${url}: ${stderr}`);
    }
    await sleep(200);
  }
}
