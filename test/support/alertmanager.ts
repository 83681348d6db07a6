import { setTimeout as sleep } from 'node:timers/promises';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import axios from 'axios';
import { aptCommand, aptInstall, type AptDeps } from '../../scripts/stack/apt-install';

/** Where Debian's prometheus-alertmanager package puts the binary. */
export const DEBIAN_ALERTMANAGER_BIN = '/usr/bin/prometheus-alertmanager';
export const ALERTMANAGER_BIN = process.env.ALERTMANAGER_BIN ?? DEBIAN_ALERTMANAGER_BIN;
const PACKAGE = 'prometheus-alertmanager';

/**
 * The Alertmanager binary, installed from Debian's packages when it is missing (as the stack installs
 * PostgreSQL), so `npm test` needs no extra step on a fresh machine. A binary named by ALERTMANAGER_BIN is
 * never installed over: apt-get could not put it there.
 */
export function ensureAlertmanager(binary = ALERTMANAGER_BIN, deps: AptDeps & { exists?: (path: string) => boolean } = {}): string {
  const exists = deps.exists ?? existsSync;
  if (exists(binary)) return binary;
  const fix = `Install it with \`${aptCommand([PACKAGE])}\` (Debian/Ubuntu), or set ALERTMANAGER_BIN to an Alertmanager binary.`;
  if (binary !== DEBIAN_ALERTMANAGER_BIN) throw new Error(`Alertmanager not found at ${binary} (ALERTMANAGER_BIN). ${fix}`);
  const outcome = aptInstall([PACKAGE], deps);
  if (!outcome.ok) {
    const why = {
      'not-root': 'the tests do not run as root, so they cannot install it',
      'no-apt': 'this machine has no apt-get to install it with',
      failed: `apt-get failed:\n${outcome.output}\n`,
    }[outcome.reason];
    throw new Error(`Alertmanager not found at ${binary} and ${why}. ${fix}`);
  }
  if (!exists(binary)) throw new Error(`apt-get installed ${PACKAGE}, but ${binary} is still missing. ${fix}`);
  return binary;
}

export interface LocalAlertmanager {
  url: string;
  stop(): Promise<void>;
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

/**
 * A real Alertmanager on a free local port: its own storage in a temp dir, clustering off, a config
 * that routes everything to a receiver with no integrations. `stop()` kills it and removes the dir.
 */
export async function startAlertmanager(): Promise<LocalAlertmanager> {
  const binary = ensureAlertmanager();
  const dir = mkdtempSync(join(tmpdir(), 'outbox-am-'));
  const configFile = join(dir, 'alertmanager.yml');
  writeFileSync(configFile, ['route:', '  receiver: sink', '  group_wait: 1s', 'receivers:', '  - name: sink', ''].join('\n'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(
    binary,
    [`--config.file=${configFile}`, `--storage.path=${join(dir, 'data')}`, '--cluster.listen-address=', `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
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
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`Alertmanager exited at start-up (code ${child.exitCode}): ${stderr}`);
    }
    const ready = await axios.get(`${url}/-/ready`, { timeout: 1_000, validateStatus: () => true }).then((r) => r.status === 200, () => false);
    if (ready) return { url, stop };
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`Alertmanager did not become ready on ${url}: ${stderr}`);
    }
    await sleep(200);
  }
}
