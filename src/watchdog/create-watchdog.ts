/**
 * The watchdog: poll → track → judge → deliver, on one dedicated connection with a statement timeout.
 * A failed poll never throws out of the loop: it raises the watchdog's own alert and the next poll
 * tries again (the pool reconnects). Delivery runs in the background (deliver.ts).
 */
import type { Pool } from 'pg';
import type { OutboxConfig } from '../config';
import { createPool, pgCode } from '../db';
import type { Logger } from '../log';
import { createEmitter, createLifecycle, repeatUntilAborted, type ServiceStatus } from '../service';
import { createAlertEngine, type AlertEngine, type AlertStatusRow } from './alert-engine';
import { createDeliverer, createReceivers, safeTarget, type Deliverer, type HttpPost } from './deliver';
import { createWatchdogMetrics, type WatchdogMetrics } from './metrics';
import { cleansOutbox, createCleanupLoop, type CleanupLoopState } from './outbox-cleanup-loop';
import { createPoller, type PollResult } from './poll';
import { createSlotTracker } from './slot-tracker';
import { standbyConnection } from './standby';
import { createConnectClient } from '../connector/connect-client';
import { offsetForServer } from '../connector/slot-guard';
import type { WatchdogEventName, WatchdogListener } from './types';

export { describePollError } from './poll-error';
export type { PollResult } from './poll';
export type { WatchdogEventName, WatchdogListener } from './types';

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

export interface WatchdogHealth {
  running: boolean;
  lastPollOk: boolean | null;
  lastSuccessAt: string | null;
  consecutiveFailures: number;
  slots: number;
  firing: number;
  pendingDeliveries: Record<string, number>;
  /** The outbox cleanup under CDC (watchdog.outboxCleanup); null when off. */
  outboxCleanup: CleanupLoopState | null;
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
  /** For /readyz: polling, and the last poll worked. */
  ready(): boolean;
  status(): ServiceStatus;
  statuses(): AlertStatusRow[];
  engine: AlertEngine;
  deliverer: Deliverer;
}

/** The database settings the watchdog (and the outbox cleanup) connect with: watchdog.user/password when set. */
export function watchdogDatabase(config: OutboxConfig): OutboxConfig['database'] {
  return { ...config.database, user: config.watchdog.user ?? config.database.user, password: config.watchdog.password ?? config.database.password };
}

export function createWatchdog(options: WatchdogOptions): Watchdog {
  const { config } = options;
  const wd = config.watchdog;
  const database = watchdogDatabase(config);
  const cluster = wd.cluster ?? `${database.host}:${database.port}`;
  const now = options.now ?? Date.now;
  const log = options.logger;
  const metrics = options.metrics ?? createWatchdogMetrics(cluster);
  const events = createEmitter<WatchdogEventName>({ listeners: [options.onEvent] });
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
  const engine = createAlertEngine({
    config: wd,
    cluster,
    now,
    instant: options.instant,
    connectorSlot: config.connector.slotName,
    connector: config.connector.name,
    outboxPartitions: { seconds: config.outbox.partitionSeconds, ahead: config.outbox.partitionsAhead },
  });
  const standbyDb = standbyConnection(config);
  const standby = standbyDb && {
    target: standbyDb.target,
    pool: createPool(
      standbyDb.database,
      { max: 1, application_name: 'outbox-watchdog', statement_timeout: wd.statementTimeoutMs, query_timeout: wd.statementTimeoutMs + 2_000, connectionTimeoutMillis: wd.connectTimeoutMs, idleTimeoutMillis: 0 },
      (error) => log?.warn({ err: { message: error.message, code: pgCode(error) } }, 'watchdog standby connection lost while idle; reconnecting on the next poll'),
    ),
  };
  const connect = wd.watchConnector ? createConnectClient(config.connect) : undefined;
  // Read when the connector's slot is missing. Connect keys the stored offset by the connector's own
  // topic.prefix, which a connector deployed by other means (a team's existing Debezium outbox) need not
  // share with connector.topicPrefix: its stored config says which (as connector:delete reads it).
  const connectorOffset =
    connect &&
    (async () => {
      const [stored, offsets] = await Promise.all([connect.getConfig(config.connector.name), connect.offsets(config.connector.name)]);
      return offsetForServer(offsets, stored?.['topic.prefix'] ?? config.connector.topicPrefix);
    });
  const deliverer = createDeliverer({
    receivers: options.deliver === false ? [] : createReceivers(wd),
    settings: wd.delivery,
    post: options.post,
    onEvent: (name, data) => {
      const outcome = name === 'watchdog.delivered' ? 'delivered' : name === 'watchdog.delivery-retry' ? 'retry' : name === 'watchdog.delivery-failed' ? 'failed' : 'dropped';
      metrics.recordDelivery(String(data.receiver), outcome);
      if (outcome === 'delivered') log?.info(data, 'alert delivered');
      else log?.[outcome === 'retry' ? 'warn' : 'error'](data, `alert delivery ${outcome}`);
      events.emit(name, data);
    },
  });
  if (log) for (const r of createReceivers(wd)) log.info({ receiver: r.kind, target: safeTarget(r.url), signed: r.kind === 'webhook' && !!wd.webhookSecret }, 'watchdog receiver configured');
  const tracker = createSlotTracker({ rateWindowMs: wd.rateWindowMs, stalledMinWalBytes: wd.rules.stalledMinWalBytes, walDiskBudgetBytes: wd.walDiskBudgetBytes });
  const hasAlertmanager = !!wd.alertmanagerUrl && options.deliver !== false;
  const target = `${database.host}:${database.port}/${database.database}`;
  const poller = createPoller({ config, database, target, pool, now, log, metrics, tracker, engine, deliverer, events, hasAlertmanager, standby, connectorOffset });

  const cleanup = cleansOutbox(config) && !options.instant ? createCleanupLoop({ config, database, log, metrics }) : undefined;
  let loops: Array<Promise<void>> = [];
  const lifecycle = createLifecycle('watchdog', {
    start: async (signal) => {
      loops = [repeatUntilAborted(async () => void (await poller.pollOnce()), { signal, intervalMs: wd.intervalMs, fromStart: true })];
      if (cleanup) loops.push(cleanup.run(signal));
    },
    stop: async () => void (await Promise.all(loops)),
  });
  const running = () => lifecycle.state === 'starting' || lifecycle.state === 'running';

  return {
    cluster,
    metrics,
    engine,
    deliverer,
    pollOnce: poller.pollOnce,
    start() {
      void lifecycle.start();
    },
    async stop(drainMs = 5_000) {
      await lifecycle.stop();
      await deliverer.drain(drainMs);
      deliverer.stop();
      await pool.end().catch(() => {});
      await standby?.pool.end().catch(() => {});
      await cleanup?.close();
    },
    health: () => ({
      running: running(),
      lastPollOk: poller.state.lastPollOk,
      lastSuccessAt: poller.state.lastSuccessAt === null ? null : new Date(poller.state.lastSuccessAt).toISOString(),
      consecutiveFailures: poller.state.consecutiveFailures,
      slots: poller.state.slots,
      firing: engine.statuses().filter((s) => s.level !== 'ok').length,
      pendingDeliveries: deliverer.pending(),
      outboxCleanup: cleanup ? { ...cleanup.state } : null,
    }),
    ready: () => running() && poller.state.lastPollOk === true,
    status: () => lifecycle.status(),
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
