import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { OutboxError } from '../errors';

/** The listener's paths: one home for the CLI, the probes in docker-compose.yml and deploy/kubernetes/. */
export const HEALTH_PATHS = Object.freeze({
  metrics: '/metrics',
  live: '/livez',
  ready: '/readyz',
  health: '/healthz',
});

export interface HealthServerOptions {
  host: string;
  port: number;
  registry: Pick<Registry, 'metrics' | 'contentType'>;
  /** 200 on /healthz when true, 503 otherwise; `details` goes into the JSON body. */
  health: () => { healthy: boolean; details: Record<string, unknown> };
  /** /livez: 200 while true (default: always, i.e. the event loop answers). */
  live?: () => boolean;
  /** /readyz: 200 while true (default: what /healthz says). */
  ready?: () => boolean;
  /** Added to /readyz's JSON body: what is degraded, ready or not (e.g. the router's inbox prune stopped, and why). */
  readyDetails?: () => Record<string, unknown>;
  /** Every other request (any method) goes here instead of a 404/405: a service's own pages on the same listener (`outbox console`). */
  fallback?: (req: IncomingMessage, res: ServerResponse) => void;
}

export interface HealthServer {
  port: number;
  close(): Promise<void>;
}

const json = (res: ServerResponse, ok: boolean, body: Record<string, unknown> = {}) =>
  res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ status: ok ? 'ok' : 'unavailable', ...body }));

/**
 * `/metrics` (Prometheus text format), `/livez` and `/readyz` (Kubernetes-style probes: 200 or 503) and
 * `/healthz` (JSON with details; kept for `outbox status` and existing checks) on one small HTTP listener.
 */
export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (options.fallback && !(Object.values(HEALTH_PATHS) as string[]).includes(path as string)) {
      options.fallback(req, res);
    } else if (req.method !== 'GET') {
      res.writeHead(405, { allow: 'GET' }).end();
    } else if (path === HEALTH_PATHS.metrics) {
      options.registry
        .metrics()
        .then((text) => res.writeHead(200, { 'content-type': options.registry.contentType }).end(text))
        .catch((error: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(error.message));
    } else if (path === HEALTH_PATHS.health) {
      const { healthy, details } = options.health();
      json(res, healthy, details);
    } else if (path === HEALTH_PATHS.live) {
      json(res, options.live?.() ?? true);
    } else if (path === HEALTH_PATHS.ready) {
      json(res, options.ready?.() ?? options.health().healthy, options.readyDetails?.());
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end(`not found: try ${Object.values(HEALTH_PATHS).join(', ')}\n`);
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        new OutboxError('HEALTH_PORT_UNAVAILABLE', `Cannot listen on ${options.host}:${options.port} for /metrics and /healthz: ${error.code ?? error.message}. Choose another port (--metrics-port) or stop what uses it.`, {
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
