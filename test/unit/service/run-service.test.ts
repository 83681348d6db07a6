import { createServer } from 'node:net';
import { Registry } from 'prom-client';
import { OutboxError } from '../../../src/errors';
import { createLifecycle, runService, type RunnableService } from '../../../src/service';

const silent = { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} } as never;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

function service(start: () => Promise<void>, ready: () => boolean): RunnableService {
  const lifecycle = createLifecycle('svc', { start, stop: async () => {} });
  return { start: () => lifecycle.start(), stop: () => lifecycle.stop(), status: () => lifecycle.status(), ready };
}

const options = (svc: RunnableService, port: number) => ({
  service: svc,
  logger: silent,
  metrics: { host: '127.0.0.1', port, registry: new Registry() },
  health: () => ({ healthy: svc.ready(), details: {} }),
  started: () => ({ fields: {}, message: 'started' }),
  stopping: 'stopping',
  stopped: () => ({ fields: {}, message: 'stopped' }),
  signals: ['SIGUSR2'] as NodeJS.Signals[],
});

describe('runService', () => {
  it('closes its listener when the service fails to start, and rethrows the failure', async () => {
    const port = await freePort();
    await expect(runService(options(service(() => Promise.reject(new Error('no brokers')), () => false), port))).rejects.toThrow('no brokers');
    // The port is free again: the listener was closed.
    const probe = createServer();
    await new Promise<void>((resolve, reject) => probe.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
    await new Promise<void>((r) => probe.close(() => r()));
  });

  it('a port already in use is HEALTH_PORT_UNAVAILABLE naming the address and the flag; the service is not started', async () => {
    const holder = createServer();
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', () => r()));
    const { port } = holder.address() as { port: number };
    let started = false;
    try {
      const error = await runService(options(service(async () => void (started = true), () => true), port)).then(
        () => undefined,
        (e: unknown) => e as OutboxError,
      );
      expect(error).toBeInstanceOf(OutboxError);
      expect(error?.code).toBe('HEALTH_PORT_UNAVAILABLE');
      expect(error?.message).toContain(`Cannot listen on 127.0.0.1:${port} for /metrics and /healthz: EADDRINUSE`);
      expect(error?.message).toContain('--metrics-port');
      expect(started).toBe(false);
    } finally {
      await new Promise<void>((r) => holder.close(() => r()));
    }
  });

  it('serves /livez, /readyz (503 until ready), /healthz and /metrics, and stops on its signal', async () => {
    const port = await freePort();
    let ready = false;
    let release!: () => void;
    const starting = new Promise<void>((r) => (release = r));
    const running = runService(options(service(() => starting, () => ready), port));
    const get = async (path: string) => (await fetch(`http://127.0.0.1:${port}${path}`)).status;
    await new Promise((r) => setTimeout(r, 50));
    expect(await get('/livez')).toBe(200);
    expect(await get('/readyz')).toBe(503); // still starting
    release();
    await new Promise((r) => setTimeout(r, 20));
    expect(await get('/readyz')).toBe(503); // running, not ready (e.g. not joined yet)
    ready = true;
    expect(await get('/readyz')).toBe(200);
    expect(await get('/healthz')).toBe(200);
    expect(await get('/metrics')).toBe(200);
    process.emit('SIGUSR2', 'SIGUSR2');
    await running;
    await expect(fetch(`http://127.0.0.1:${port}/livez`)).rejects.toThrow();
  });

  it("puts the service's readiness details in /readyz's body, ready or not", async () => {
    const port = await freePort();
    const svc = { ...service(async () => {}, () => true), readyDetails: () => ({ inboxPrune: { blocked: true, reasons: ['compacted'] } }) };
    const running = runService(options(svc, port));
    await new Promise((r) => setTimeout(r, 50));
    const res = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok', inboxPrune: { blocked: true, reasons: ['compacted'] } });
    process.emit('SIGUSR2', 'SIGUSR2');
    await running;
  });
});
