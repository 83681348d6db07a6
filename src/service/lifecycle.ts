/** Where a long-running service is in its life. `failed`: its start threw (and what it opened was closed). */
export type ServiceState = 'idle' | 'starting' | 'running' | 'stopping' | 'stopped' | 'failed';

export interface LifecycleHooks {
  /** Opens what the service needs and starts its loops; `signal` aborts when stop() begins (or start fails). */
  start(signal: AbortSignal): Promise<void>;
  /** Runs first in stop(), before the signal aborts (e.g. commit what is done while waits still run). */
  beforeAbort?(): Promise<void>;
  /** Closes what start() opened; also called when start() fails part-way, so it must cope with a partial start. */
  stop(): Promise<void>;
}

export interface ServiceStatus {
  state: ServiceState;
  /** When the state last changed (ISO 8601). */
  since: string;
  /** Why the last start failed. */
  error?: string;
}

export interface Lifecycle {
  readonly state: ServiceState;
  /** The current run's signal: aborts when stop() begins. */
  readonly signal: AbortSignal;
  /** Idempotent: resolves at once while running, joins a start in progress. Throws while stopping. */
  start(): Promise<void>;
  /** Idempotent: nothing to do unless started; joins a stop in progress. */
  stop(): Promise<void>;
  status(): ServiceStatus;
}

/**
 * One lifecycle for the router, the relay and the watchdog: idle → starting → running → stopping →
 * stopped (again startable), or → failed when start() throws, after the hooks' stop() has closed what
 * the partial start opened. The AbortController is new per run and aborts when stop begins.
 */
export function createLifecycle(name: string, hooks: LifecycleHooks): Lifecycle {
  let state: ServiceState = 'idle';
  let since = new Date();
  let error: string | undefined;
  let abort = new AbortController();
  let starting: Promise<void> | undefined;
  let stopping: Promise<void> | undefined;
  const enter = (next: ServiceState) => {
    state = next;
    since = new Date();
  };

  async function runStart(): Promise<void> {
    enter('starting');
    error = undefined;
    abort = new AbortController();
    try {
      await hooks.start(abort.signal);
    } catch (failure) {
      abort.abort();
      await hooks.stop().catch(() => {});
      error = (failure as Error)?.message ?? String(failure);
      enter('failed');
      throw failure;
    }
    enter('running');
  }

  async function runStop(): Promise<void> {
    await starting?.catch(() => {});
    if (state !== 'running') return;
    enter('stopping');
    try {
      await hooks.beforeAbort?.();
    } finally {
      abort.abort();
      await hooks.stop().finally(() => enter('stopped'));
    }
  }

  return {
    get state() {
      return state;
    },
    get signal() {
      return abort.signal;
    },
    start() {
      if (state === 'running') return Promise.resolve();
      if (state === 'starting' && starting) return starting;
      if (state === 'stopping') return Promise.reject(new Error(`${name}.start(): the ${name} is stopping`));
      starting = runStart().finally(() => (starting = undefined));
      return starting;
    },
    stop() {
      if (stopping) return stopping;
      if (state !== 'running' && state !== 'starting') return Promise.resolve();
      stopping = runStop().finally(() => (stopping = undefined));
      return stopping;
    },
    status: () => ({ state, since: since.toISOString(), ...(error === undefined ? {} : { error }) }),
  };
}
