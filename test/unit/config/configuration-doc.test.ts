import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { settingsTable, withGeneratedTables } from '../../../src/cli/config-docs';
import { ENV_SETTINGS } from '../../../src/config';

/**
 * docs/configuration.md's router and relay tables, and the table of derived variable names, are
 * generated from the schema, the env vars and the flags; this keeps them in step (UPDATE_DOCS=1 rewrites the file instead of failing).
 */
describe('docs/configuration.md', () => {
  const path = join(__dirname, '../../../docs/configuration.md');
  const text = readFileSync(path, 'utf8');

  it('has the generated router and relay tables as the schema makes them', () => {
    const fresh = withGeneratedTables(text);
    if (process.env.UPDATE_DOCS === '1' && fresh !== text) writeFileSync(path, fresh);
    expect(text).toBe(fresh);
  });

  it('names every environment variable loadConfig reads', () => {
    const missing = ENV_SETTINGS.filter((s) => !text.includes(`\`${s.env}\``) && !text.includes(s.env)).map((s) => s.env);
    expect(missing).toEqual([]);
  });

  it('the generated tables hold every derived variable (OUTBOX_ + the path in UPPER_SNAKE_CASE), and every router and relay one', () => {
    const generated = (['router', 'relay', 'console', 'derived'] as const).map(settingsTable).join('\n');
    const missing = ENV_SETTINGS.filter((s) => (s.derived || ['router', 'relay', 'console'].includes(s.path[0] as string)) && !generated.includes(`| \`${s.path.join('.')}\` | \`${s.env}\` |`));
    expect(missing.map((s) => s.env)).toEqual([]);
    expect(settingsTable('derived')).toContain('| `watchdog.delivery.maxQueue` | `OUTBOX_WATCHDOG_DELIVERY_MAX_QUEUE` | `1000` |');
    expect(settingsTable('router')).toContain('| `router.backoff.initialDelayMs` | `OUTBOX_ROUTER_BACKOFF_INITIAL_DELAY_MS` |  | `200` |');
  });

  it('the router table holds its settings once, each with its env var, flag and the one default', () => {
    const table = settingsTable('router');
    expect(table).toContain('| `router.maxTransactionRecords` | `OUTBOX_ROUTER_MAX_TRANSACTION_RECORDS` | `--max-transaction-records` | `500` |');
    expect(table).toContain('| `router.metricsPort` | `OUTBOX_ROUTER_METRICS_PORT` | `--metrics-port` | `9464` |');
    expect(table).toContain('| `router.lanes` | `OUTBOX_ROUTER_LANES` | `--lanes` | `1` |');
  });
});
