import type { Registry } from 'prom-client';
import type { Logger } from '../log';
import { startHealthServer, type HealthServerOptions } from './health-server';
import type { ServiceStatus } from './lifecycle';

/** What `runService` runs: a started-and-stopped thing with a status and a readiness. */
export interface RunnableService {
  start(): Promise<void>;
  stop(): Promise<void>;
  status(): ServiceStatus;
  ready(): boolean;
  /** /readyz's body beside its status (see HealthServerOptions.readyDetails). */
  readyDetails?(): Record<string, unknown>;
}

export interface RunServiceOptions {
  service: RunnableService;
  logger: Logger;
  /** Where /metrics, /livez, /readyz and /healthz listen; `fallback` serves every other request there. */
  metrics: { host: string; port: number; registry: Pick<Registry, 'metrics' | 'contentType'>; fallback?: HealthServerOptions['fallback'] };
  /** The /healthz body (kept as each service has always answered it). */
  health: () => { healthy: boolean; details: Record<string, unknown> };
  /** Logged once started, with the metrics URL added to `fields`. */
  started: (url: string) => { fields: Record<string, unknown>; message: string };
  /** Logged when a signal arrives. */
  stopping: string;
  /** Logged once stopped. */
  stopped: () => { fields: Record<string, unknown>; message: string };
  /** Tests: the signals that stop the service. */
  signals?: NodeJS.Signals[];
}

/** Live while the service has not stopped or failed; the event loop answering the probe is the rest. */
export const isLive = (status: ServiceStatus): boolean => status.state !== 'stopped' && status.state !== 'failed';

/**
 * The CLI's one runner of a long-running service: opens the HTTP listener, starts the service (closing
 * the listener again if that fails, so the error is printed and the process exits), then runs until
 * SIGTERM or SIGINT, stops the service and closes the listener. Resolves once stopped.
 */
export async function runService(options: RunServiceOptions): Promise<void> {
  const { service, logger: log } = options;
  const http = await startHealthServer({
    ...options.metrics,
    health: options.health,
    live: () => isLive(service.status()),
    ready: () => service.status().state === 'running' && service.ready(),
    readyDetails: () => service.readyDetails?.() ?? {},
  });
  try {
    await service.start();
  } catch (error) {
    // An open listener would keep the process alive after the error is printed: close it first.
    await http.close();
    throw error;
  }
  const started = options.started(`http://${options.metrics.host}:${http.port}/metrics`);
  log.info(started.fields, started.message);
  const signals = options.signals ?? ['SIGTERM', 'SIGINT'];
  await new Promise<void>((resolveStop) => {
    const stop = (signal: NodeJS.Signals) => {
      for (const s of signals) process.removeListener(s, stop);
      log.info({ signal }, options.stopping);
      void service
        .stop()
        .then(() => http.close())
        .finally(() => {
          const stopped = options.stopped();
          log.info(stopped.fields, stopped.message);
          resolveStop();
        });
    };
    for (const s of signals) process.once(s, stop);
  });
}
