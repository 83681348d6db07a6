import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import axios from 'axios';

export const ALERTMANAGER_BIN = process.env.ALERTMANAGER_BIN ?? '/usr/bin/prometheus-alertmanager';

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
  if (!existsSync(ALERTMANAGER_BIN)) throw new Error(`Alertmanager not found at ${ALERTMANAGER_BIN}: apt-get install prometheus-alertmanager, or set ALERTMANAGER_BIN.`);
  const dir = mkdtempSync(join(tmpdir(), 'outbox-am-'));
  const configFile = join(dir, 'alertmanager.yml');
  writeFileSync(configFile, ['route:', '  receiver: sink', '  group_wait: 1s', 'receivers:', '  - name: sink', ''].join('\n'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(
    ALERTMANAGER_BIN,
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
    await new Promise((r) => setTimeout(r, 200));
  }
}
