import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { OutboxError } from '../errors';

export interface HealthServerOptions {
  host: string;
  port: number;
  registry: Registry;
  /** 200 on /healthz when true, 503 otherwise; `details` goes into the JSON body. */
  health: () => { healthy: boolean; details: Record<string, unknown> };
}

export interface HealthServer {
  port: number;
  close(): Promise<void>;
}

/** `/metrics` (Prometheus text format) and `/healthz` (JSON) on one small HTTP listener. */
export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET') {
      res.writeHead(405, { allow: 'GET' }).end();
    } else if (path === '/metrics') {
      options.registry
        .metrics()
        .then((text) => res.writeHead(200, { 'content-type': options.registry.contentType }).end(text))
        .catch((error: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(error.message));
    } else if (path === '/healthz') {
      const { healthy, details } = options.health();
      res.writeHead(healthy ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ status: healthy ? 'ok' : 'unavailable', ...details }));
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /metrics or /healthz\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        new OutboxError('CONFIG_INVALID', `Cannot listen on ${options.host}:${options.port} for /metrics and /healthz: ${error.code ?? error.message}. Choose another port (--metrics-port) or stop what uses it.`, {
          cause: error,
        }),
      ),
    );
    server.listen(options.port, options.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
