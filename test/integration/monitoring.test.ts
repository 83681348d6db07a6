/**
 * monitoring/ against the real thing: promtool checks and unit-tests the alert rules, and a real
 * Prometheus (Debian's 2.42, installed by the test setup when missing) scrapes a running router, watchdog
 * and relay on the stack, loads the rules, and answers every dashboard panel's query.
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { dirname } from 'node:path';
import axios from 'axios';
import type { Registry } from 'prom-client';
import { createRelay, createRelayMetrics, type Relay } from '../../src/relay';
import { createRouterMetrics, startHealthServer, type HealthServer, type Router } from '../../src/router';
import { createWatchdog, type Watchdog } from '../../src/watchdog';
import { grafanaExpr, panelQueries, RULES_FILE, RULES_TEST_FILE, SCRAPE_EXAMPLE_FILE } from '../support/monitoring';
import { testConfig } from '../support/outbox-config';
import { promtoolBinary, startPrometheus, type LocalPrometheus, type QueryResult } from '../support/prometheus';
import { routerHarness } from '../support/router-scenario';
import { randomIdentifier, randomName, withClient } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

jest.setTimeout(180_000);

/** Panels that must show data with a router, a watchdog and a relay at work (a dead letter included). */
const CORE_PANELS = [
  'Consumer lag',
  'Commit → handled latency',
  'Records by outcome',
  'Inbox transaction',
  'Dead letters',
  'Parked keys',
  'Parked events',
  'Oldest parked event',
  'Retained WAL',
  'Unconfirmed WAL',
  'Slot active',
  'Slot wal_status',
  'Inactive and not confirming',
  'WAL rate and retention growth',
  'Watchdog polls',
  'Relay lag',
  'Published and failed',
  'Claims',
  'Relay database',
  'Targets up',
  'Resident memory',
  'CPU',
  'Event-loop delay p99',
];

const promtool = (...args: string[]) => {
  const result = spawnSync(promtoolBinary(), args, { encoding: 'utf8', cwd: dirname(args[args.length - 1] as string) });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
};

describe('monitoring/ rules with promtool', () => {
  it('promtool check rules: the rules file is valid', () => {
    const { status, output } = promtool('check', 'rules', RULES_FILE);
    expect(output).toMatch(/SUCCESS: \d+ rules found/);
    expect(status).toBe(0);
  });

  it('promtool test rules: every alert fires on its input series and resolves', () => {
    const { status, output } = promtool('test', 'rules', RULES_TEST_FILE);
    expect(output).toContain('SUCCESS');
    expect(status).toBe(0);
  });

  it('promtool check config: the example scrape configuration, with the rules it loads', () => {
    const { status, output } = promtool('check', 'config', SCRAPE_EXAMPLE_FILE);
    expect(output).toMatch(/SUCCESS/);
    expect(status).toBe(0);
  });
});

describe('the dashboard on a real Prometheus scraping a router, a watchdog and a relay', () => {
  const h = routerHarness('monitoring');
  const servers: HealthServer[] = [];
  let watchdog: Watchdog | undefined;
  let relay: Relay | undefined;
  let prometheus: LocalPrometheus | undefined;
  let slot: string | undefined;
  const until = waitsUpTo(90_000, 1_000);

  // Inside the test, before the harness's afterAll drops the database (and with it, the slot's database).
  async function cleanUp(): Promise<void> {
    await prometheus?.stop();
    await watchdog?.stop(0);
    await relay?.stop();
    for (const server of servers.splice(0)) await server.close();
    if (slot) await withClient(h.config.database.database, (c) => c.query('SELECT pg_drop_replication_slot($1)', [slot]));
  }

  const serve = async (registry: Registry, healthy: () => boolean) => {
    const server = await startHealthServer({ host: '127.0.0.1', port: 0, registry, health: () => ({ healthy: healthy(), details: {} }) });
    servers.push(server);
    return `127.0.0.1:${server.port}`;
  };

  it('every panel query runs without error; the core panels return data; every rule loads and evaluates', async () => {
    let stopTraffic = false;
    let traffic: Promise<void> | undefined;
    try {
      const database = h.config.database.database;

      // The router: good records, and one without eventType (dead-lettered, its key parked).
      const s = await h.scenario(2);
      const routerMetrics = createRouterMetrics();
      const router: Router = await h.startRouter(s, h.handlers(s), { onEvent: routerMetrics.onEvent, parkedMetricsIntervalMs: 1_000 });
      const routerTarget = await serve(routerMetrics.registry, () => router.health().running);
      await h.produce(s, [{ key: 'bad', headers: { id: randomUUID(), contentType: 'application/json' } }]);

      // The watchdog, on a slot of its own in this test's database.
      slot = randomIdentifier('mon');
      await withClient(database, (c) => c.query("SELECT pg_create_logical_replication_slot($1, 'test_decoding')", [slot]));
      const wdConfig = testConfig(database, { watchdog: { intervalMs: 500, rateWindowMs: 5_000, cluster: 'monitoring-test', slots: [slot], watchConnector: false } });
      watchdog = createWatchdog({ config: wdConfig, deliver: false });
      watchdog.start();
      const watchdogTarget = await serve(watchdog.metrics.registry, () => true);

      // The relay, publishing to topics of its own.
      const prefix = randomName('t').replace(/-/g, '');
      const relayConfig = testConfig(database, { connector: { topicReplacement: `${prefix}.outbox.event.\${routedByValue}`, topicPrefix: prefix }, relay: { lagIntervalMs: 1_000 } });
      const relayMetrics = createRelayMetrics();
      relay = createRelay({ config: relayConfig, logger: h.silent, onEvent: relayMetrics.onEvent, settings: { workers: 1, pollIntervalMs: 50 } });
      await relay.start();
      const relayTarget = await serve(relayMetrics.registry, () => true);

      prometheus = await startPrometheus({
        jobs: { 'outbox-router': [routerTarget], 'outbox-watchdog': [watchdogTarget], 'outbox-relay': [relayTarget] },
        scrapeInterval: '1s',
        ruleFiles: [RULES_FILE],
      });
      const prom = prometheus;

      // Traffic while Prometheus scrapes: a record routed, an outbox row relayed and some WAL every 500 ms.
      traffic = (async () => {
        for (let i = 0; !stopTraffic; i++) {
          await h.produce(s, [{ key: `k${i % 3}`, reason: `r${i}` }]);
          await h.pool.query("INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type) VALUES (gen_random_uuid(), 'ping', $1, 'Pinged', convert_to('{}', 'UTF8'), 'application/json')", [`p${i}`]);
          await h.pool.query("SELECT pg_logical_emit_message(false, 'monitoring-test', repeat('x', 65536))");
          await new Promise((r) => setTimeout(r, 500));
        }
      })();

      const queries = panelQueries().map((q) => ({ ...q, promql: grafanaExpr(q.expr, { rateInterval: '30s', jobs: 'outbox-.*' }) }));
      const runAll = async () => {
        const results = new Map<string, QueryResult>();
        for (const q of queries) results.set(`${q.panel} ${q.refId}`, await prom.query(q.promql)); // rejects on any query error
        return results;
      };
      const emptyCore = (results: Map<string, QueryResult>) =>
        CORE_PANELS.filter((panel) => !queries.some((q) => q.panel === panel && (results.get(`${q.panel} ${q.refId}`)?.result.length ?? 0) > 0));
      expect(CORE_PANELS.filter((p) => !queries.some((q) => q.panel === p))).toEqual([]);
      // the probe's value names the panels still empty when it gives up (a Map prints as {})
      const { results } = await until(
        'every core panel has data',
        async () => {
          const all = await runAll();
          return { emptyPanels: emptyCore(all), results: all };
        },
        (r) => r.emptyPanels.length === 0,
      );
      for (const result of results.values()) expect(result.resultType).toBe('vector');
      // the numbers are the running services', not leftovers
      const outcomes = results.get('Records by outcome A')?.result.map((r) => r.metric.outcome);
      expect(outcomes).toEqual(expect.arrayContaining(['applied', 'dead_lettered']));
      const slots = results.get('Retained WAL A')?.result.map((r) => r.metric.slot_name);
      // The watchdog exports every slot of the cluster (its `slots` list scopes the alerts only), and other
      // test files may hold slots at this moment: this test's slot must be among them.
      expect(slots).toContain(slot);
      const p99 = Number(results.get('Commit → handled latency B')?.result[0]?.value[1]);
      expect(p99).toBeGreaterThan(0);

      // Every alerting rule loaded into this Prometheus and evaluates without error.
      const rules = await until(
        'rules evaluated',
        async () => (await axios.get<{ data: { groups: Array<{ rules: Array<{ name: string; health: string; lastError?: string }> }> } }>(`${prom.url}/api/v1/rules`)).data.data.groups.flatMap((g) => g.rules),
        (rs) => rs.length > 0 && rs.every((r) => r.health !== 'unknown'),
      );
      expect(rules.filter((r) => r.health !== 'ok').map((r) => `${r.name}: ${r.lastError}`)).toEqual([]);
    } finally {
      stopTraffic = true;
      await traffic;
      await cleanUp();
    }
  });
});
