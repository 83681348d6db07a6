/**
 * monitoring/: the dashboard and the alert rules use only metrics the code registers (a renamed metric
 * would leave a panel empty and an alert silent), every alert has its runbook entry, and the folder ships.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Registry } from 'prom-client';
import { parse } from 'yaml';
import { createRelayMetrics } from '../../src/relay';
import { createRouterMetrics } from '../../src/router';
import { createWatchdogMetrics } from '../../src/watchdog';
import { slugs } from '../support/markdown';
import { alertRules, allPanels, dashboard, metricNames, panelQueries, RULES_TEST_FILE } from '../support/monitoring';

const root = resolve(__dirname, '../..');
/** Series Prometheus makes itself for every target. */
const PROMETHEUS_SERIES = ['up'];

/** Every series name the router, watchdog and relay expose: histograms as their _bucket, _sum and _count. */
async function exported(): Promise<Set<string>> {
  const registries: Registry[] = [createRouterMetrics().registry, createWatchdogMetrics('test').registry, createRelayMetrics().registry];
  const names = new Set<string>(PROMETHEUS_SERIES);
  for (const registry of registries) {
    for (const m of await registry.getMetricsAsJSON()) {
      if (String(m.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(m.name + suffix);
      else names.add(m.name);
    }
  }
  return names;
}

describe('monitoring/', () => {
  it('reads metric names out of PromQL', () => {
    expect(metricNames('sum by (job, le) (rate(outbox_router_commit_to_handled_seconds_bucket{job=~"$jobs",x="a(b)"}[$__rate_interval]))')).toEqual(['outbox_router_commit_to_handled_seconds_bucket']);
    expect(metricNames('a > 0 unless on (job, topic) sum by (job) (rate(b[10m])) > 5 * 1024 ^ 3')).toEqual(['a', 'b']);
    expect(metricNames('time() - max by (job) (c_seconds)')).toEqual(['c_seconds']);
  });

  it('the dashboard and the rules use only metric names the code registers', async () => {
    const names = await exported();
    const used = [...panelQueries().map((q) => ({ where: `panel "${q.panel}" ${q.refId}`, expr: q.expr })), ...alertRules().map((r) => ({ where: `alert ${r.alert}`, expr: r.expr }))];
    const unknown = used.flatMap(({ where, expr }) => metricNames(expr).filter((n) => !names.has(n)).map((n) => `${where}: ${n}`));
    expect(unknown).toEqual([]);
    // the extraction found something in every expression
    expect(used.filter(({ expr }) => metricNames(expr).length === 0)).toEqual([]);
  });

  it('covers the signals: lag, latency, outcomes, DLQ, parked keys, retained WAL, time to invalidation, relay lag', () => {
    const exprs = [...panelQueries().map((q) => q.expr), ...alertRules().map((r) => r.expr)].join('\n');
    for (const metric of [
      'outbox_router_consumer_lag',
      'outbox_router_commit_to_handled_seconds_bucket',
      'outbox_router_records_total',
      'outbox_router_parked_keys',
      'pg_replication_slots_pg_wal_lsn_diff',
      'outbox_watchdog_slot_eta_invalidation_seconds',
      'outbox_relay_lag_seconds',
    ]) {
      expect(exprs).toContain(metric);
    }
    expect(exprs).toContain('dead_lettered');
  });

  it('every alert has severity warning or critical, a summary and a runbook entry in docs/operations.md', () => {
    const headings = slugs(readFileSync(join(root, 'docs/operations.md'), 'utf8'));
    for (const rule of alertRules()) {
      expect(['warning', 'critical']).toContain(rule.labels.severity);
      expect(rule.annotations.summary).toBeTruthy();
      const url = rule.annotations.runbook_url ?? '';
      expect(url).toMatch(/^https:\/\/github\.com\/outbox-router\/outbox-router\/blob\/main\/docs\/operations\.md#/);
      expect(url.split('#')[1]).toBe(rule.alert.toLowerCase());
      expect(headings).toContain(rule.alert.toLowerCase());
    }
  });

  it('the dashboard: unique panel ids, every query on the ${datasource} variable, $jobs in every selector', () => {
    const d = dashboard();
    const ids = allPanels(d).map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(d.templating.list.map((v) => v.name)).toEqual(['datasource', 'jobs']);
    for (const p of allPanels(d).filter((x) => x.type !== 'row')) {
      expect(p.datasource?.uid).toBe('${datasource}');
      for (const t of p.targets ?? []) {
        expect(t.datasource?.uid).toBe('${datasource}');
        // every selector narrows to the outbox jobs (postgres_exporter has pg_replication_slots_* too)
        for (const name of metricNames(t.expr)) expect(t.expr).toContain(`${name}{job=~"$jobs"`);
      }
    }
  });

  it("the promtool test file has every alert firing, then resolved (promtool runs it: test/integration/monitoring.test.ts)", () => {
    const doc = parse(readFileSync(RULES_TEST_FILE, 'utf8')) as { tests: Array<{ alert_rule_test: Array<{ eval_time: string; alertname: string; exp_alerts?: unknown[] }> }> };
    const minutes = (t: string) => Number(/^(\d+)m$/.exec(t)?.[1] ?? NaN);
    const untested = [...new Set(alertRules().map((r) => r.alert))].filter((alert) => {
      const cases = doc.tests.flatMap((t) => t.alert_rule_test).filter((c) => c.alertname === alert);
      const fired = cases.filter((c) => (c.exp_alerts ?? []).length > 0).map((c) => minutes(c.eval_time));
      const quiet = cases.filter((c) => (c.exp_alerts ?? []).length === 0).map((c) => minutes(c.eval_time));
      return !fired.some((f) => quiet.some((q) => q > f));
    });
    expect(untested).toEqual([]);
  });

  it('package.json ships monitoring/', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { files: string[] };
    expect(pkg.files).toContain('monitoring');
  });
});
