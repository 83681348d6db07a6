import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { settingsTable, withGeneratedTables } from '../../../src/cli/config-docs';
import { ENV_SETTINGS } from '../../../src/config';

/**
 * docs/configuration.md's router and relay tables are generated from the schema, the env vars and the
 * flags; this keeps them in step (UPDATE_DOCS=1 rewrites the file instead of failing).
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

  it('the router table holds its settings once, each with its env var, flag and the one default', () => {
    const table = settingsTable('router');
    expect(table).toContain('| `router.maxTransactionRecords` | `OUTBOX_ROUTER_MAX_TRANSACTION_RECORDS` | `--max-transaction-records` | `500` |');
    expect(table).toContain('| `router.metricsPort` | `OUTBOX_ROUTER_METRICS_PORT` | `--metrics-port` | `9464` |');
    expect(table).toContain('| `router.lanes` | `OUTBOX_ROUTER_LANES` | `--lanes` | `1` |');
  });
});
