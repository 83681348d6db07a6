/**
 * src/service/process-metrics.ts: the router's and the watchdog's /metrics carry prom-client's default
 * metrics under their standard names (stock Node.js dashboards and monitoring/ rely on them), and one
 * registry shared by both collects them once.
 */
import { Registry } from 'prom-client';
import { createRouterMetrics } from '../../../src/router';
import { collectProcessMetrics } from '../../../src/service';
import { createWatchdogMetrics } from '../../../src/watchdog';

const STANDARD = ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'process_start_time_seconds', 'nodejs_eventloop_lag_p99_seconds', 'nodejs_heap_size_used_bytes'];

const names = async (registry: Registry) => new Set((await registry.getMetricsAsJSON()).map((m) => m.name));

describe('process metrics keep their standard names', () => {
  it.each([
    ['router', () => createRouterMetrics().registry],
    ['watchdog', () => createWatchdogMetrics('test').registry],
  ])('the %s exports process_* and nodejs_* without a prefix', async (_, registry) => {
    const found = await names(registry());
    for (const name of STANDARD) expect(found).toContain(name);
    expect([...found].filter((n) => /^outbox_\w+_(process|nodejs)_/.test(n))).toEqual([]);
  });

  it('a router and a watchdog on one registry collect them once', async () => {
    const registry = new Registry();
    createRouterMetrics(registry);
    createWatchdogMetrics('test', registry);
    collectProcessMetrics(registry);
    const text = await registry.metrics();
    expect(text.match(/^# TYPE process_cpu_seconds_total /gm)).toHaveLength(1);
    expect(await names(registry)).toContain('outbox_router_records_total');
    expect(await names(registry)).toContain('pg_replication_slots_active');
  });
});
