import { createLifecycle } from '../../../src/service';

describe('createLifecycle', () => {
  it('goes idle → starting → running → stopping → stopped, aborting the signal when stop begins', async () => {
    const seen: string[] = [];
    let signal: AbortSignal | undefined;
    const lifecycle = createLifecycle('svc', {
      start: async (s) => {
        signal = s;
        seen.push(`start:${lifecycle.state}`);
      },
      beforeAbort: async () => void seen.push(`beforeAbort:${lifecycle.state}:${signal?.aborted}`),
      stop: async () => void seen.push(`stop:${lifecycle.state}:${signal?.aborted}`),
    });
    expect(lifecycle.state).toBe('idle');
    await lifecycle.start();
    expect(lifecycle.state).toBe('running');
    await lifecycle.stop();
    expect(lifecycle.state).toBe('stopped');
    expect(seen).toEqual(['start:starting', 'beforeAbort:stopping:false', 'stop:stopping:true']);
  });

  it('start and stop are idempotent: concurrent calls share one run of each hook', async () => {
    const calls = { start: 0, stop: 0 };
    const lifecycle = createLifecycle('svc', { start: async () => void calls.start++, stop: async () => void calls.stop++ });
    await Promise.all([lifecycle.start(), lifecycle.start()]);
    await lifecycle.start();
    await Promise.all([lifecycle.stop(), lifecycle.stop()]);
    await lifecycle.stop();
    expect(calls).toEqual({ start: 1, stop: 1 });
  });

  it('a start that throws closes what it opened, ends failed with the reason, and may be started again', async () => {
    let fail = true;
    const stops: boolean[] = [];
    const lifecycle = createLifecycle('svc', {
      start: async () => {
        if (fail) throw new Error('kafka is down');
      },
      stop: async () => void stops.push(true),
    });
    await expect(lifecycle.start()).rejects.toThrow('kafka is down');
    expect(stops).toEqual([true]);
    expect(lifecycle.status()).toMatchObject({ state: 'failed', error: 'kafka is down' });
    expect(lifecycle.signal.aborted).toBe(true);
    fail = false;
    await lifecycle.start();
    expect(lifecycle.status().state).toBe('running');
    expect(lifecycle.signal.aborted).toBe(false);
  });

  it('stop() during start waits for the start, then stops', async () => {
    let release!: () => void;
    const lifecycle = createLifecycle('svc', { start: () => new Promise<void>((r) => (release = r)), stop: async () => {} });
    const started = lifecycle.start();
    const stopped = lifecycle.stop();
    expect(lifecycle.state).toBe('starting');
    release();
    await started;
    await stopped;
    expect(lifecycle.state).toBe('stopped');
  });

  it('refuses a start while stopping', async () => {
    let release!: () => void;
    const lifecycle = createLifecycle('svc', { start: async () => {}, stop: () => new Promise<void>((r) => (release = r)) });
    await lifecycle.start();
    const stopped = lifecycle.stop();
    await new Promise((r) => setImmediate(r));
    await expect(lifecycle.start()).rejects.toThrow('svc.start(): the svc is stopping');
    release();
    await stopped;
  });
});
