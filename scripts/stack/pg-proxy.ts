/**
 * The stable address of the PostgreSQL pair (postgres-ha.ts): a TCP proxy that forwards every connection
 * to the current primary. Why a proxy and not the clients' own failover: node-postgres has no multi-host
 * connection strings or `target_session_attrs`, and Debezium's `database.hostname` is one host. Both keep
 * one address; the proxy moves it.
 *
 *   node build/scripts/stack/pg-proxy.js --listen 127.0.0.1:55432 --target-file <file>
 *
 * The target is one line `host:port` in `--target-file`, read at start and again on SIGHUP. When it
 * changes, every open connection is closed: a client must reconnect and so reaches the new primary; a
 * session left on a dead (or demoted) primary must not linger. After each read the proxy writes the
 * target it applied to `<target-file>.applied`, which switchProxy() waits for.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { formatProxyTarget, parseProxyTarget, type ProxyTarget } from './postgres-ha-config';

function argument(name: string): string {
  const index = process.argv.indexOf(name);
  const value = index >= 0 ? process.argv[index + 1] : undefined;
  if (!value) {
    process.stderr.write(`pg-proxy: ${name} is required (usage: pg-proxy.js --listen host:port --target-file <file>)\n`);
    process.exit(2);
  }
  return value;
}

const log = (line: string): void => void process.stdout.write(`${new Date().toISOString()} pg-proxy[${process.pid}] ${line}\n`);

const targetFile = argument('--target-file');
const listen = parseProxyTarget(argument('--listen'), '--listen');
const open = new Set<Socket>();
let target: ProxyTarget | undefined;

/** Re-reads the target file; on a change closes every connection. A bad file keeps the old target. */
function applyTarget(): void {
  let next: ProxyTarget;
  try {
    next = parseProxyTarget(readFileSync(targetFile, 'utf8'), targetFile);
  } catch (error) {
    log(`target not changed: ${(error as Error).message}`);
    return;
  }
  if (!target || target.host !== next.host || target.port !== next.port) {
    log(`target ${target ? `${target.host}:${target.port}` : '(none)'} -> ${next.host}:${next.port}; closing ${open.size} sockets`);
    target = next;
    for (const socket of open) socket.destroy();
    open.clear();
  }
  const tmp = `${targetFile}.applied.tmp`;
  writeFileSync(tmp, formatProxyTarget(next));
  renameSync(tmp, `${targetFile}.applied`);
}

const server = createServer((client) => {
  const to = target;
  if (!to) {
    client.destroy();
    return;
  }
  const upstream = connect({ host: to.host, port: to.port });
  // PostgreSQL's protocol is many small messages each waiting for a reply: no Nagle delay on either leg.
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  open.add(client);
  open.add(upstream);
  const close = (): void => {
    client.destroy();
    upstream.destroy();
    open.delete(client);
    open.delete(upstream);
  };
  // A dead primary refuses the connection (or resets it): the client sees its socket close and reconnects.
  client.on('error', close).on('close', close);
  upstream.on('error', close).on('close', close);
  client.pipe(upstream);
  upstream.pipe(client);
});

applyTarget();
process.on('SIGHUP', applyTarget);
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    log(`${signal}: closing ${open.size} sockets`);
    for (const socket of open) socket.destroy();
    server.close(() => process.exit(0));
  });
}
server.on('error', (error) => {
  log(`cannot listen on ${listen.host}:${listen.port}: ${error.message}`);
  process.exit(1);
});
server.listen({ host: listen.host, port: listen.port, exclusive: true }, () => log(`listening on ${listen.host}:${listen.port}, target file ${targetFile}`));
