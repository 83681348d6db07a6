/**
 * monitoring/ as the tests read it: the alert rules, the dashboard's panel expressions, and the metric
 * names a PromQL expression uses.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';

export const MONITORING_DIR = resolve(__dirname, '../../monitoring');
export const RULES_FILE = join(MONITORING_DIR, 'outbox-alerts.yml');
export const DASHBOARD_FILE = join(MONITORING_DIR, 'outbox-dashboard.json');
export const SCRAPE_EXAMPLE_FILE = join(MONITORING_DIR, 'prometheus.example.yml');
/** The promtool unit tests of the rules (`promtool test rules`). */
export const RULES_TEST_FILE = resolve(__dirname, 'monitoring/outbox-alerts.test.yml');

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

export function alertRules(): AlertRule[] {
  const doc = parse(readFileSync(RULES_FILE, 'utf8')) as { groups: Array<{ name: string; rules: AlertRule[] }> };
  return doc.groups.flatMap((g) => g.rules);
}

export interface PanelQuery {
  panel: string;
  refId: string;
  expr: string;
}

interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  targets?: Array<{ refId: string; expr: string; datasource?: { uid: string } }>;
  panels?: Panel[];
}

export interface Dashboard {
  uid: string;
  panels: Panel[];
  templating: { list: Array<{ name: string; type: string; query: string }> };
}

export const dashboard = (): Dashboard => JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as Dashboard;

/** Every panel (rows' nested panels included). */
export function allPanels(d: Dashboard = dashboard()): Panel[] {
  return d.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
}

export function panelQueries(d: Dashboard = dashboard()): PanelQuery[] {
  return allPanels(d).flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, refId: t.refId, expr: t.expr })));
}

/** A panel expression as Prometheus receives it from Grafana: the dashboard's variables replaced. */
export function grafanaExpr(expr: string, vars: { rateInterval: string; jobs: string }): string {
  return expr.replace(/\$__rate_interval/g, vars.rateInterval).replace(/\$jobs/g, vars.jobs);
}

const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan']);

/**
 * The metric names an expression selects: identifiers outside strings, label matchers, ranges and
 * grouping lists that are not function calls, keywords or numbers. Enough for the expressions of
 * monitoring/ (no `__name__` matchers, no subqueries with odd spacing).
 */
export function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of stripped.matchAll(/[A-Za-z_:][\w:]*(?!\w)(\s*\()?/g)) {
    const [whole, call] = [m[0], m[1]];
    const name = whole.replace(/\s*\($/, '');
    if (call || KEYWORDS.has(name.toLowerCase())) continue;
    if (/^\d/.test(name)) continue;
    names.add(name);
  }
  return [...names];
}
