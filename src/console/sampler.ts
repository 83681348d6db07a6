import axios from 'axios';
import type { Pool } from 'pg';
import type { OutboxConfig } from '../config';
import { redactUrl } from '../log/redact';
import type { Logger } from '../log';
import { collectStatus, type StatusReport } from '../status';
import { createSlotTracker, sampleSlots, type SlotStatus } from '../watchdog';
import { parseHistogram, quantileBetween, type Histogram } from './prom-text';
import { createSeries, type Point, type Series } from './series';

/** The charts' series: one home for their names (the page reads them by these). */
export const SERIES = ['slotLagBytes', 'slotRetainedBytes', 'consumerLag', 'latencyP50Ms', 'latencyP99Ms'] as const;
export type SeriesName = (typeof SERIES)[number];

/** Parked keys read per sample: the page lists them all (the totals count every key). */
export const PARKED_KEYS_SHOWN = 200;

/** A connector task's state change the console saw between two samples. */
export interface TaskChange {
  at: string;
  task: number;
  from: string;
  to: string;
}

export interface Snapshot {
  sampledAt: string;
  status: StatusReport;
  /** The connector's slot as the watchdog's tracker sees it over the samples: rates and the invalidation ETA. */
  slot: SlotStatus | null;
  slotError: string | null;
  /** The router's /metrics as read for the latency chart (credentials masked), and why not when it could not be. */
  routerMetrics: { url: string; error: string | null };
  /** Task state changes seen in the kept history; `restarts` counts those that came back to RUNNING. */
  taskChanges: TaskChange[];
  restarts: number;
}

export interface Sampler {
  /** One sample now (also what every tick runs). Never throws: a part that fails is reported in the snapshot. */
  sample(): Promise<Snapshot>;
  latest(): Snapshot | undefined;
  series(): Record<SeriesName, Point[]>;
}

export interface SamplerOptions {
  config: OutboxConfig;
  /** A pool on the configured database (the slot query needs pg_monitor or the owner). */
  pool: Pool;
  logger?: Logger;
  now?: () => number;
}

/** The router's /metrics: console.routerMetricsUrl, else router.metricsHost:metricsPort (a wildcard address is read on loopback). */
export function routerMetricsUrl(config: OutboxConfig): string {
  if (config.console.routerMetricsUrl) return config.console.routerMetricsUrl;
  const { metricsHost, metricsPort } = config.router;
  const host = metricsHost === '0.0.0.0' || metricsHost === '::' ? '127.0.0.1' : metricsHost.includes(':') ? `[${metricsHost}]` : metricsHost;
  return `http://${host}:${metricsPort}/metrics`;
}

const LATENCY = 'outbox_router_commit_to_handled_seconds';

/**
 * What the overview and the charts show, sampled by the console itself every `console.sampleIntervalMs`
 * (no Prometheus needed; the history is in memory and starts empty on each start): `outbox status`'s
 * report (collectStatus, the same code), the connector's slot through the watchdog's slot tracker (for
 * the growth rate and the invalidation ETA), and the router's latency histogram, whose p50 and p99 are
 * those of the records handled between two samples.
 */
export function createSampler(options: SamplerOptions): Sampler {
  const { config, pool } = options;
  const now = options.now ?? Date.now;
  const keepMs = config.console.historyMs;
  const series = Object.fromEntries(SERIES.map((name) => [name, createSeries(keepMs)])) as Record<SeriesName, Series>;
  const tracker = createSlotTracker({ rateWindowMs: config.watchdog.rateWindowMs, stalledMinWalBytes: config.watchdog.rules.stalledMinWalBytes, walDiskBudgetBytes: config.watchdog.walDiskBudgetBytes });
  const metricsUrl = routerMetricsUrl(config);
  let histogram: Histogram | undefined;
  let latest: Snapshot | undefined;
  let taskChanges: TaskChange[] = [];
  let tasks = new Map<number, string>();

  async function readSlot(slotName: string): Promise<{ slot: SlotStatus | null; error: string | null }> {
    try {
      const client = await pool.connect();
      try {
        const tracked = tracker.track(await sampleSlots(client));
        return { slot: tracked.slots.find((s) => s.slotName === slotName) ?? null, error: null };
      } finally {
        client.release();
      }
    } catch (error) {
      return { slot: null, error: `cannot read the slot: ${(error as Error).message}` };
    }
  }

  async function readLatency(): Promise<{ p50: number | null; p99: number | null; error: string | null }> {
    try {
      const response = await axios.get<string>(metricsUrl, { timeout: 3_000, responseType: 'text', validateStatus: (s) => s === 200 });
      const next = parseHistogram(response.data, LATENCY);
      if (!next) return { p50: null, p99: null, error: `${LATENCY} not found at ${redactUrl(metricsUrl)}` };
      const before = histogram;
      histogram = next;
      if (!before) return { p50: null, p99: null, error: null };
      const ms = (q: number) => {
        const v = quantileBetween(before, next, q);
        return v === undefined ? null : Math.round(v * 1000 * 10) / 10;
      };
      return { p50: ms(0.5), p99: ms(0.99), error: null };
    } catch (error) {
      histogram = undefined;
      const code = (error as { code?: string }).code;
      return { p50: null, p99: null, error: `the router's metrics at ${redactUrl(metricsUrl)} did not answer (${code ?? (error as Error).message}); set console.routerMetricsUrl` };
    }
  }

  function trackTasks(status: StatusReport, at: string): void {
    if (!status.connector.ok) return;
    const next = new Map(status.connector.tasks.map((t) => [t.id, t.state]));
    for (const [id, state] of next) {
      const before = tasks.get(id);
      if (before !== undefined && before !== state) taskChanges.push({ at, task: id, from: before, to: state });
    }
    tasks = next;
    taskChanges = taskChanges.filter((c) => Date.parse(c.at) >= now() - keepMs);
  }

  return {
    async sample() {
      const t = now();
      const sampledAt = new Date(t).toISOString();
      const status = await collectStatus(config, { logger: options.logger, parkedLimit: PARKED_KEYS_SHOWN, timeoutMs: Math.min(5_000, config.console.sampleIntervalMs) });
      const slotName = status.slots.ok ? status.slots.slotName : config.connector.slotName;
      const [{ slot, error: slotError }, latency] = await Promise.all([readSlot(slotName), readLatency()]);
      trackTasks(status, sampledAt);
      series.slotLagBytes.add(t, slot?.flushLagBytes ?? null);
      series.slotRetainedBytes.add(t, slot?.retainedBytes ?? null);
      series.consumerLag.add(t, status.consumerGroups.ok ? status.consumerGroups.groups.reduce((sum, g) => sum + g.totalLag, 0) : null);
      series.latencyP50Ms.add(t, latency.p50);
      series.latencyP99Ms.add(t, latency.p99);
      latest = {
        sampledAt,
        status,
        slot,
        slotError,
        routerMetrics: { url: redactUrl(metricsUrl), error: latency.error },
        taskChanges: [...taskChanges],
        restarts: taskChanges.filter((c) => c.to === 'RUNNING' && c.from !== 'RUNNING').length,
      };
      return latest;
    },
    latest: () => latest,
    series: () => Object.fromEntries(SERIES.map((name) => [name, series[name].points()])) as Record<SeriesName, Point[]>,
  };
}
