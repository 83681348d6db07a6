/**
 * The watchdog: poll → track → judge → deliver, on one dedicated connection with a statement timeout.
 * A failed poll never throws out of the loop: it raises the watchdog's own alert and the next poll
 * tries again (the pool reconnects). Delivery runs in the background (deliver.ts).
 */
import { performance } from 'node:perf_hooks';
import type { Pool } from 'pg';
import type { OutboxConfig } from '../config';
import { checkPublication, type PublicationCheck } from '../connector/publication-check';
import { createPool, pgCode } from '../db';
import { OutboxError, isOutboxError } from '../errors';
import type { Logger } from '../log';
import { sleepUnlessAborted } from '../retry';
import { createAlertEngine, type AlertEngine, type AlertNotification, type AlertStatusRow } from './alert-engine';
import { createDeliverer, createReceivers, safeTarget, type Deliverer, type DeliveryEventName, type HttpPost } from './deliver';
import { createWatchdogMetrics, type WatchdogMetrics } from './metrics';
import { readSettings, readSlots, type ServerSettings } from './slot-query';
import { createSlotTracker, type TrackedSample } from './slot-tracker';

export type WatchdogEventName = 'watchdog.poll' | 'watchdog.poll-failed' | 'watchdog.alert' | DeliveryEventName;
export type WatchdogListener = (name: WatchdogEventName, data: Record<string, unknown>) => void;

export interface WatchdogOptions {
  config: OutboxConfig;
  logger?: Logger;
  onEvent?: WatchdogListener;
  /** Clock of the alert state machine (hold-for, clear, repeat). */
  now?: () => number;
  post?: HttpPost;
  metrics?: WatchdogMetrics;
  /** `--once`: judge one sample without hold-for; nothing is delivered unless `deliver` is true. */
  instant?: boolean;
  deliver?: boolean;
}

export interface PollResult {
  ok: boolean;
  durationMs: number;
  sample?: TrackedSample;
  settings?: ServerSettings | null;
  error?: OutboxError;
  notifications: AlertNotification[];
}

export interface WatchdogHealth {
  running: boolean;
  lastPollOk: boolean | null;
  lastSuccessAt: string | null;
  consecutiveFailures: number;
  slots: number;
  firing: number;
  pendingDeliveries: Record<string, number>;
}

export interface Watchdog {
  readonly cluster: string;
  readonly metrics: WatchdogMetrics;
  pollOnce(): Promise<PollResult>;
  /** Polls every `watchdog.intervalMs` until stop(). */
  start(): void;
  /** Stops polling, waits up to `drainMs` for queued notifications, closes the connection. */
  stop(drainMs?: number): Promise<void>;
  health(): WatchdogHealth;
  statuses(): AlertStatusRow[];
  engine: AlertEngine;
  deliverer: Deliverer;
}

const SETTINGS_REFRESH_MS = 5 * 60_000;

/** Turns a poll failure into a message that names the target and the fix; never includes secrets. */
export function describePollError(error: unknown, target: string, user: string): OutboxError {
  if (isOutboxError(error)) return error;
  const code = pgCode(error) ?? (error as { code?: string }).code;
  const message = (error as Error)?.message ?? String(error);
  const fix =
    code === '28P01' || code === '28000'
      ? `Authentication failed for role ${user}: set watchdog.user / watchdog.password (OUTBOX_WATCHDOG_USER / OUTBOX_WATCHDOG_PASSWORD) or PGUSER / PGPASSWORD to a role that may log in.`
      : code === '42501'
        ? `Role ${user} lacks a right the watchdog needs: GRANT pg_monitor TO ${user}; and GRANT CONNECT ON DATABASE to it.`
        : code === '3D000'
          ? 'The database does not exist: set PGDATABASE (database.database) to an existing one.'
          : code === '57014'
            ? 'The slot query exceeded watchdog.statementTimeoutMs (OUTBOX_WATCHDOG_STATEMENT_TIMEOUT_MS): the server is overloaded or blocked; raise the timeout only if this persists.'
            : code === '53300'
              ? 'The server has no free connection slot: raise max_connections or reserve one for monitoring.'
              : `Check that PostgreSQL runs and accepts connections at ${target} (PGHOST / PGPORT).`;
  const retriable = !['28P01', '28000', '3D000', '42501'].includes(code ?? '');
  return new OutboxError(code === '57014' || code === '42501' ? 'WATCHDOG_QUERY_FAILED' : 'DB_UNAVAILABLE', `Cannot read replication slots as ${user}@${target}: ${message}. ${fix}`, {
    retriable,
    cause: error,
    details: { code },
  });
}

export function createWatchdog(options: WatchdogOptions): Watchdog {
  const { config } = options;
  const wd = config.watchdog;
  const database = { ...config.database, user: wd.user ?? config.database.user, password: wd.password ?? config.database.password };
  const target = `${database.host}:${database.port}/${database.database}`;
  const cluster = wd.cluster ?? `${database.host}:${database.port}`;
  const now = options.now ?? Date.now;
  const log = options.logger;
  const metrics = options.metrics ?? createWatchdogMetrics(cluster);
  const emit: WatchdogListener = (name, data) => {
    try {
      options.onEvent?.(name, data);
    } catch {
      // emitting never crashes the emitter
    }
  };

  const pool: Pool = createPool(
    database,
    {
      max: 1,
      application_name: 'outbox-watchdog',
      statement_timeout: wd.statementTimeoutMs,
      lock_timeout: Math.min(1_000, wd.statementTimeoutMs),
      query_timeout: wd.statementTimeoutMs + 2_000,
      connectionTimeoutMillis: wd.connectTimeoutMs,
      idleTimeoutMillis: 0,
    },
    (error) => log?.warn({ err: { message: error.message, code: pgCode(error) } }, 'watchdog connection lost while idle; reconnecting on the next poll'),
  );
  const tracker = createSlotTracker({ rateWindowMs: wd.rateWindowMs, stalledMinWalBytes: wd.rules.stalledMinWalBytes, walDiskBudgetBytes: wd.walDiskBudgetBytes });
  const connectorSlot = config.connector.slotName;
  const engine = createAlertEngine({ config: wd, cluster, now, instant: options.instant, connectorSlot });
  const { publication, schema, table } = config.outbox;
  const deliverer = createDeliverer({
    receivers: options.deliver === false ? [] : createReceivers(wd),
    settings: wd.delivery,
    post: options.post,
    onEvent: (name, data) => {
      const outcome = name === 'watchdog.delivered' ? 'delivered' : name === 'watchdog.delivery-retry' ? 'retry' : name === 'watchdog.delivery-failed' ? 'failed' : 'dropped';
      metrics.recordDelivery(String(data.receiver), outcome);
      if (outcome === 'delivered') log?.info(data, 'alert delivered');
      else log?.[outcome === 'retry' ? 'warn' : 'error'](data, `alert delivery ${outcome}`);
      emit(name, data);
    },
  });
  if (log) for (const r of createReceivers(wd)) log.info({ receiver: r.kind, target: safeTarget(r.url), signed: r.kind === 'webhook' && !!wd.webhookSecret }, 'watchdog receiver configured');

  let settings: ServerSettings | null = null;
  let settingsAt = 0;
  let lastPollOk: boolean | null = null;
  let lastSuccessAt: number | null = null;
  let failures = 0;
  let slotCount = 0;
  let lastAmResend = now();
  let running = false;
  let loop: Promise<void> | null = null;
  const abort = new AbortController();
  const hasAlertmanager = !!wd.alertmanagerUrl && options.deliver !== false;

  const pollOnce = async (): Promise<PollResult> => {
    const started = performance.now();
    let notifications: AlertNotification[];
    let sample: TrackedSample | undefined;
    let pub: PublicationCheck | undefined;
    let error: OutboxError | undefined;
    try {
      let client;
      try {
        client = await pool.connect();
      } catch (e) {
        throw describePollError(e, target, database.user);
      }
      let broken: Error | undefined;
      try {
        if (!settings || now() - settingsAt > SETTINGS_REFRESH_MS) {
          settings = await readSettings(client);
          settingsAt = now();
        }
        const raw = await readSlots(client, settings.versionNum);
        sample = tracker.track(raw, settings);
        // The publication only matters while the connector's slot decodes this database.
        if (wd.watchConnector && sample.slots.some((s) => s.slotName === connectorSlot && s.database === database.database)) {
          pub = await checkPublication(client, { publication, schema, table });
        }
      } catch (e) {
        broken = e as Error;
        throw describePollError(e, target, database.user);
      } finally {
        client.release(broken && !pgCode(broken) ? broken : undefined);
      }
      notifications = engine.evaluate(sample, settings, pub);
      failures = 0;
      lastPollOk = true;
      lastSuccessAt = now();
      slotCount = sample.slots.length;
    } catch (e) {
      error = describePollError(e, target, database.user);
      failures++;
      lastPollOk = false;
      settings = null;
      notifications = engine.pollFailed(error.message, { code: (error.details.code as string | undefined) ?? error.code });
      log?.error({ code: error.code, failures }, error.message);
      emit('watchdog.poll-failed', { message: error.message, code: error.code, failures });
    }
    const durationMs = performance.now() - started;
    metrics.recordPoll(!error, durationMs, sample, settings);
    metrics.recordAlerts(engine.statuses());
    for (const n of notifications) {
      log?.[n.status === 'firing' && n.severity === 'critical' ? 'error' : n.status === 'firing' ? 'warn' : 'info'](
        { rule: n.rule, slot: n.slot?.name, event: n.event, severity: n.severity, dedupKey: n.dedupKey },
        n.summary,
      );
      emit('watchdog.alert', { ...n });
    }
    deliverer.enqueue(notifications);
    if (hasAlertmanager && now() - lastAmResend >= wd.alertmanagerResendMs) {
      lastAmResend = now();
      const sent = new Set(notifications.map((n) => n.dedupKey));
      deliverer.enqueue(engine.firing().filter((n) => !sent.has(n.dedupKey)), 'alertmanager');
    }
    metrics.setQueue(deliverer.pending());
    emit('watchdog.poll', { ok: !error, durationMs, slots: sample?.slots.length ?? null, notifications: notifications.length });
    return { ok: !error, durationMs, sample, settings, error, notifications };
  };

  return {
    cluster,
    metrics,
    engine,
    deliverer,
    pollOnce,
    start() {
      if (running) return;
      running = true;
      loop = (async () => {
        while (!abort.signal.aborted) {
          const began = performance.now();
          await pollOnce();
          const rest = Math.max(0, wd.intervalMs - (performance.now() - began));
          if (!(await sleepUnlessAborted(rest, abort.signal))) break;
        }
      })();
    },
    async stop(drainMs = 5_000) {
      abort.abort();
      await loop;
      running = false;
      await deliverer.drain(drainMs);
      deliverer.stop();
      await pool.end().catch(() => {});
    },
    health: () => ({
      running,
      lastPollOk,
      lastSuccessAt: lastSuccessAt === null ? null : new Date(lastSuccessAt).toISOString(),
      consecutiveFailures: failures,
      slots: slotCount,
      firing: engine.statuses().filter((s) => s.level !== 'ok').length,
      pendingDeliveries: deliverer.pending(),
    }),
    statuses: () => engine.statuses(),
  };
}

/**
 * The /healthz answer of a watchdog: healthy while it runs and its last poll worked, with its health
 * and the alerts firing now by name (what `outbox status` shows).
 */
export function watchdogHealthBody(watchdog: Pick<Watchdog, 'health' | 'statuses'>): { healthy: boolean; details: Record<string, unknown> } {
  const h = watchdog.health();
  const alerts = watchdog
    .statuses()
    .filter((row) => row.level !== 'ok')
    .map((row) => ({ name: row.rule, slot: row.slot, level: row.level, state: 'firing', summary: row.summary }));
  return { healthy: h.running && h.lastPollOk !== false, details: { ...h, alerts } };
}
