import { ensureDebianBinary, startLocalServer, type DebianServer, type EnsureDeps } from './debian-service';

export { freePort } from './debian-service';

/** Where Debian's prometheus-alertmanager package puts the binary. */
export const DEBIAN_ALERTMANAGER_BIN = '/usr/bin/prometheus-alertmanager';
export const ALERTMANAGER_BIN = process.env.ALERTMANAGER_BIN ?? DEBIAN_ALERTMANAGER_BIN;

/** Its packaged service would listen on 9093, the local stack's Kafka controller port. */
const ALERTMANAGER: DebianServer = { name: 'Alertmanager', package: 'prometheus-alertmanager', debianBinary: DEBIAN_ALERTMANAGER_BIN, env: 'ALERTMANAGER_BIN', services: ['prometheus-alertmanager'] };

/** The Alertmanager binary, installed from Debian's packages when it is missing (ensureDebianBinary). */
export function ensureAlertmanager(binary = ALERTMANAGER_BIN, deps: EnsureDeps = {}): string {
  return ensureDebianBinary(ALERTMANAGER, binary, deps);
}

export interface LocalAlertmanager {
  url: string;
  stop(): Promise<void>;
}

/**
 * A real Alertmanager on a free local port: its own storage in a temp dir, clustering off, a config
 * that routes everything to a receiver with no integrations. `stop()` kills it and removes the dir.
 */
export async function startAlertmanager(): Promise<LocalAlertmanager> {
  const { url, stop } = await startLocalServer({
    name: 'Alertmanager',
    binary: ensureAlertmanager(),
    files: { 'alertmanager.yml': ['route:', '  receiver: sink', '  group_wait: 1s', 'receivers:', '  - name: sink', ''].join('\n') },
    args: (dir, port) => [`--config.file=${dir}/alertmanager.yml`, `--storage.path=${dir}/data`, '--cluster.listen-address=', `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    readyPath: '/-/ready',
  });
  return { url, stop };
}
