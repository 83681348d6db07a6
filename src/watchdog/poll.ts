import { performance } from 'node:perf_hooks';
import type { Pool, PoolClient } from 'pg';
import type { OutboxConfig } from '../config';
import { checkPublication, type PublicationCheck } from '../connector/publication-check';
import { pgCode } from '../db';
import type { OutboxError } from '../errors';
import type { Logger } from '../log';
import type { Emitter } from '../service';
import type { AlertEngine, AlertNotification } from './alert-engine';
import type { Deliverer } from './deliver';
import type { WatchdogMetrics } from './metrics';
import { sampleOutbox, type OutboxTableSample } from './outbox-query';
import { describePollError } from './poll-error';
import { readSettings, readSlots, type ServerSettings } from './slot-query';
import { readPrimaryFailoverFacts, readStandbySlots } from './failover-query';
import type { FailoverFacts, StandbyRead } from './failover-rules';
import { offsetLsn, formatLsn } from '../connector/slot-guard';
import { redactUrl } from '../log/redact';
import type { SlotTracker, TrackedSample } from './slot-tracker';
import type { WatchdogEventName } from './types';

export interface PollResult {
  ok: boolean;
  durationMs: number;
  sample?: TrackedSample;
  settings?: ServerSettings | null;
  /** The outbox table's sample, when watchdog.watchOutbox is on and it could be read. */
  outbox?: OutboxTableSample;
  /** What the failover rules judged (failover-rules.ts), when the poll read it. */
  failover?: FailoverFacts;
  error?: OutboxError;
  notifications: AlertNotification[];
}

/** What the poll needs (create-watchdog.ts builds it once). */
export interface PollContext {
  config: OutboxConfig;
  database: { user: string; database: string };
  target: string;
  pool: Pool;
  now: () => number;
  log?: Logger;
  metrics: WatchdogMetrics;
  tracker: SlotTracker;
  engine: AlertEngine;
  deliverer: Deliverer;
  events: Emitter<WatchdogEventName>;
  hasAlertmanager: boolean;
  /** watchdog.standby.databaseUrl's connection (standby.ts), when set. */
  standby?: { pool: Pool; target: string };
  /** Connect's stored offset of the connector (only asked while its slot is missing); undefined when none. */
  connectorOffset?: () => Promise<Record<string, unknown> | undefined>;
}

/** What polls have learnt (health, readiness). */
export interface PollState {
  lastPollOk: boolean | null;
  lastSuccessAt: number | null;
  consecutiveFailures: number;
  slots: number;
}

const SETTINGS_REFRESH_MS = 5 * 60_000;

/** One poll: read slots (and the publication), judge, queue the notifications. Never throws. */
export function createPoller(ctx: PollContext): { pollOnce(): Promise<PollResult>; state: PollState } {
  const wd = ctx.config.watchdog;
  const state: PollState = { lastPollOk: null, lastSuccessAt: null, consecutiveFailures: 0, slots: 0 };
  let settings: ServerSettings | null = null;
  let settingsAt = 0;
  let lastAmResend = ctx.now();

  type Read = { sample: TrackedSample; pub?: PublicationCheck; outbox?: OutboxTableSample; failover?: FailoverFacts };
  /** The last outbox sampling problem logged: logged again only when it changes. */
  let outboxProblem: string | null = null;

  /**
   * The outbox's health is secondary to the slots: a failure to sample it (a statement timeout, a
   * missing grant) is logged and leaves its alerts as they are, and never fails the poll.
   */
  async function readOutbox(client: PoolClient): Promise<OutboxTableSample | undefined> {
    const { schema, table } = ctx.config.outbox;
    let outbox: OutboxTableSample | undefined;
    let problem: string | null;
    try {
      // Under CDC a row waits until the connector's slot confirms it (outbox-query.ts).
      outbox = await sampleOutbox(client, { schema, table, cdcSlot: wd.watchConnector ? ctx.config.connector.slotName : undefined });
      problem = !outbox.present ? `outbox table ${outbox.table} does not exist` : outbox.pendingError;
    } catch (e) {
      if (!pgCode(e)) throw e;
      problem = (e as Error).message;
    }
    if (problem !== outboxProblem) {
      if (problem) ctx.log?.warn({ table: `${schema}.${table}` }, `watchdog: outbox health not fully sampled: ${problem} (watchdog.watchOutbox=false turns the sampling off)`);
      else if (outboxProblem) ctx.log?.info({ table: `${schema}.${table}` }, 'watchdog: outbox health sampled again');
      outboxProblem = problem;
    }
    return outbox;
  }

  /** The standby's slots (a second connection): a failure is the FailoverStandbyUnreadable rule's, never the poll's. */
  async function readStandby(): Promise<StandbyRead | undefined> {
    if (!ctx.standby) return undefined;
    const { pool, target } = ctx.standby;
    let client: PoolClient | undefined;
    let broken: Error | undefined;
    try {
      client = await pool.connect();
      return { target, sample: await readStandbySlots(client) };
    } catch (e) {
      broken = e as Error;
      return { target, error: redactUrl((e as Error).message) };
    } finally {
      client?.release(broken && !pgCode(broken) ? broken : undefined);
    }
  }

  /** Only while the connector's slot is missing: Connect's stored offset, the mark of a slot lost in a failover. */
  async function lostOffset(sample: TrackedSample): Promise<string | undefined> {
    const slot = ctx.config.connector.slotName;
    if (!wd.watchConnector || !ctx.connectorOffset || sample.slots.some((s) => s.slotName === slot)) return undefined;
    try {
      const lsn = offsetLsn(await ctx.connectorOffset());
      return lsn === undefined ? undefined : formatLsn(lsn);
    } catch (e) {
      ctx.log?.debug({ err: { message: (e as Error).message } }, 'watchdog: could not read the connector\'s stored offset from Kafka Connect');
      return undefined;
    }
  }

  async function readFailover(client: PoolClient, sample: TrackedSample): Promise<FailoverFacts> {
    const [primary, standby, offset] = await Promise.all([readPrimaryFailoverFacts(client), readStandby(), lostOffset(sample)]);
    return { primary, ...(standby ? { standby } : {}), ...(offset ? { connectorOffsetLsn: offset } : {}) };
  }

  async function read(client: PoolClient): Promise<Read> {
    if (!settings || ctx.now() - settingsAt > SETTINGS_REFRESH_MS) {
      settings = await readSettings(client);
      settingsAt = ctx.now();
    }
    const sample = ctx.tracker.track(await readSlots(client, settings.versionNum), settings);
    const outbox = wd.watchOutbox ? await readOutbox(client) : undefined;
    const failover = await readFailover(client, sample);
    const slot = ctx.config.connector.slotName;
    // The publication only matters while the connector's slot decodes this database.
    if (wd.watchConnector && sample.slots.some((s) => s.slotName === slot && s.database === ctx.database.database)) {
      const { publication, schema, table } = ctx.config.outbox;
      return { sample, outbox, failover, pub: await checkPublication(client, { publication, schema, table }) };
    }
    return { sample, outbox, failover };
  }

  async function sampleSlots(): Promise<Read> {
    let client;
    try {
      client = await ctx.pool.connect();
    } catch (e) {
      throw describePollError(e, ctx.target, ctx.database.user);
    }
    let broken: Error | undefined;
    try {
      return await read(client);
    } catch (e) {
      broken = e as Error;
      throw describePollError(e, ctx.target, ctx.database.user);
    } finally {
      client.release(broken && !pgCode(broken) ? broken : undefined);
    }
  }

  function deliver(notifications: AlertNotification[]): void {
    for (const n of notifications) {
      ctx.log?.[n.status === 'firing' && n.severity === 'critical' ? 'error' : n.status === 'firing' ? 'warn' : 'info'](
        { rule: n.rule, slot: n.slot?.name, event: n.event, severity: n.severity, dedupKey: n.dedupKey },
        n.summary,
      );
      ctx.events.emit('watchdog.alert', { ...n });
    }
    ctx.deliverer.enqueue(notifications);
    if (ctx.hasAlertmanager && ctx.now() - lastAmResend >= wd.alertmanagerResendMs) {
      lastAmResend = ctx.now();
      const sent = new Set(notifications.map((n) => n.dedupKey));
      ctx.deliverer.enqueue(ctx.engine.firing().filter((n) => !sent.has(n.dedupKey)), 'alertmanager');
    }
  }

  async function pollOnce(): Promise<PollResult> {
    const started = performance.now();
    let notifications: AlertNotification[];
    let sample: TrackedSample | undefined;
    let outbox: OutboxTableSample | undefined;
    let failover: FailoverFacts | undefined;
    let error: OutboxError | undefined;
    try {
      const read = await sampleSlots();
      sample = read.sample;
      outbox = read.outbox;
      failover = read.failover;
      notifications = ctx.engine.evaluate(sample, settings, read.pub, outbox, failover);
      Object.assign(state, { consecutiveFailures: 0, lastPollOk: true, lastSuccessAt: ctx.now(), slots: sample.slots.length });
    } catch (e) {
      error = describePollError(e, ctx.target, ctx.database.user);
      state.consecutiveFailures++;
      state.lastPollOk = false;
      settings = null;
      notifications = ctx.engine.pollFailed(error.message, { code: (error.details.code as string | undefined) ?? error.code });
      ctx.log?.error({ code: error.code, failures: state.consecutiveFailures }, error.message);
      ctx.events.emit('watchdog.poll-failed', { message: error.message, code: error.code, failures: state.consecutiveFailures });
    }
    const durationMs = performance.now() - started;
    ctx.metrics.recordPoll(!error, durationMs, sample, settings);
    if (wd.watchOutbox && !error) ctx.metrics.recordOutbox(outbox);
    ctx.metrics.recordAlerts(ctx.engine.statuses());
    deliver(notifications);
    ctx.metrics.setQueue(ctx.deliverer.pending());
    ctx.events.emit('watchdog.poll', { ok: !error, durationMs, slots: sample?.slots.length ?? null, notifications: notifications.length });
    return { ok: !error, durationMs, sample, settings, outbox, failover, error, notifications };
  }

  return { pollOnce, state };
}
