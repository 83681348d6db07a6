import { collectDefaultMetrics, type Registry } from 'prom-client';

/** A metric every collectDefaultMetrics() registers: its presence means they are already collected. */
const MARKER = 'process_cpu_seconds_total';

/**
 * prom-client's default process and Node.js metrics under their standard names (`process_*`,
 * `nodejs_*`, no prefix), so stock Node.js dashboards and the `job`/`instance` labels Prometheus adds
 * tell the router, watchdog and relay apart. Idempotent per registry: a router and a watchdog sharing one
 * registry in one process collect them once (a second collectDefaultMetrics() would throw on the
 * duplicate names).
 */
export function collectProcessMetrics(registry: Registry): void {
  if (registry.getSingleMetric(MARKER)) return;
  collectDefaultMetrics({ register: registry });
}
