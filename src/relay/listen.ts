import { Client, type ClientConfig } from 'pg';
import { backoffDelay, type BackoffSettings } from '../retry';

export interface ListenerOptions {
  /** Connection settings of the dedicated LISTEN session (outside the relay's pool). */
  client: ClientConfig;
  channel: string;
  /** A notification arrived, or the session (re)connected and rows may have come in while it was down. */
  onWake(): void;
  /** `listening` after LISTEN succeeded; `down` when it failed or the session dropped, with the retry delay. */
  onState(state: 'listening' | 'down', data: { error?: string; retryInMs?: number; attempt?: number }): void;
  backoff: BackoffSettings;
  random?: () => number;
}

export interface Listener {
  /** Connects and LISTENs; never throws: while it cannot, the relay polls, and it retries with backoff. */
  start(): Promise<void>;
  stop(): Promise<void>;
  /** True while the session is connected and listening. */
  listening(): boolean;
}

/**
 * The relay's LISTEN session. Notifications only end the workers' idle sleep early; the poll stays the
 * fallback, so a lost notification, a missing trigger or a dropped session costs at most one poll interval.
 * A dropped session is reconnected with backoff (jittered, doubling up to the ceiling).
 */
export function createListener(options: ListenerOptions): Listener {
  const random = options.random ?? Math.random;
  let client: Client | undefined;
  let stopped = true;
  let up = false;
  let failures = 0;
  let timer: NodeJS.Timeout | undefined;

  const down = (session: Client, error: unknown) => {
    if (client !== session || stopped) return;
    client = undefined;
    up = false;
    session.removeAllListeners('notification');
    void session.end().catch(() => {});
    failures++;
    const retryInMs = backoffDelay(failures, options.backoff, random);
    options.onState('down', { error: (error as Error)?.message ?? String(error), retryInMs, attempt: failures });
    timer = setTimeout(() => void connect(), retryInMs);
  };

  async function connect(): Promise<void> {
    timer = undefined;
    if (stopped) return;
    const session = new Client(options.client);
    client = session;
    // Registered before connect: an error of an idle session must not crash the process.
    session.on('error', (error) => down(session, error));
    session.on('end', () => down(session, new Error('the LISTEN session ended')));
    session.on('notification', (message) => {
      if (message.channel === options.channel) options.onWake();
    });
    try {
      await session.connect();
      await session.query(`LISTEN ${session.escapeIdentifier(options.channel)}`);
    } catch (error) {
      down(session, error);
      return;
    }
    if (client !== session || stopped) return;
    up = true;
    failures = 0;
    options.onState('listening', {});
    // Rows committed while the session was down (or before it first listened) were not announced.
    options.onWake();
  }

  return {
    async start() {
      stopped = false;
      await connect();
    },
    async stop() {
      stopped = true;
      up = false;
      if (timer) clearTimeout(timer);
      timer = undefined;
      const session = client;
      client = undefined;
      await session?.end().catch(() => {});
    },
    listening: () => up,
  };
}
