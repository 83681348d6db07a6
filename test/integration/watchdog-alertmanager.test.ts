/**
 * The watchdog posting to a real Alertmanager (started here on a free port, killed in afterAll),
 * which lists the alert in its API and drops it from the active list once the watchdog resolves it.
 */
import axios from 'axios';
import { loadConfig } from '../../src/config';
import { POSTGRES } from '../../scripts/stack/settings';
import { createWatchdog, dedupKey, type Watchdog } from '../../src/watchdog';
import { startAlertmanager, type LocalAlertmanager } from '../support/alertmanager';
import { freshDatabase, randomIdentifier, withClient, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

const MiB = 1024 * 1024;

interface AmAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  status: { state: string };
  startsAt: string;
}

const until = waitsUpTo(20_000, 100);

describe('watchdog → real Alertmanager', () => {
  let am: LocalAlertmanager;
  let db: FreshDatabase;
  let watchdog: Watchdog | undefined;
  const slot = randomIdentifier('wdam');

  beforeAll(async () => {
    am = await startAlertmanager();
    db = await freshDatabase('wdam');
    await withClient(db.name, (c) => c.query("SELECT pg_create_logical_replication_slot($1, 'test_decoding')", [slot]));
  });

  afterAll(async () => {
    await watchdog?.stop(0);
    await withClient(POSTGRES.database, (c) => c.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1', [slot])).catch(() => {});
    await db?.drop();
    await am?.stop();
  });

  it('receives the alert, lists it in GET /api/v2/alerts, and drops it from the active list when resolved', async () => {
    const base = await withClient(db.name, async (c) => Number((await c.query('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint AS r FROM pg_replication_slots WHERE slot_name = $1', [slot])).rows[0].r));
    const config = loadConfig({
      env: {},
      overrides: {
        database: { database: db.name },
        watchdog: {
          intervalMs: 200,
          cluster: 'am-test',
          slots: [slot],
          clearForMs: 0,
          alertmanagerUrl: am.url,
          alertmanagerResendMs: 1_000,
          rules: { retainedBytes: { warning: base + 4 * MiB, critical: 1024 ** 4 }, retainedForMs: 0 },
          delivery: { initialDelayMs: 100 },
        },
      },
    });
    const delivered: string[] = [];
    watchdog = createWatchdog({ config, onEvent: (name, data) => void (name === 'watchdog.delivered' && delivered.push(String(data.receiver))) });
    watchdog.start();
    await withClient(db.name, (c) => c.query("SELECT pg_logical_emit_message(false, 'wdam', repeat('x', $1::int))", [8 * MiB]));

    const key = dedupKey('am-test', slot, 'SlotRetainedHigh');
    const listed = async () => {
      const { data } = await axios.get<AmAlert[]>(`${am.url}/api/v2/alerts`, { params: { filter: `dedup_key="${key}"` } });
      return data;
    };
    const [alert] = await until('alert listed', async () => ((await listed()).length > 0 ? await listed() : false));
    expect(alert?.labels).toMatchObject({ alertname: 'SlotRetainedHigh', cluster: 'am-test', slot_name: slot, database: db.name, severity: 'warning', dedup_key: key, service: 'outbox-watchdog' });
    expect(alert?.annotations.summary).toMatch(new RegExp(`Slot ${slot} retains`));
    expect(alert?.status.state).toBe('active');
    expect(delivered).toContain('alertmanager');

    // restart_lsn moves only past a running-xacts record (CHECKPOINT writes one) and never past the start of a
    // transaction still open anywhere in the cluster (other suites'): advance until it has moved.
    await until(
      'slot advanced',
      () =>
        withClient(db.name, async (c) => {
          await c.query('SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())', [slot]);
          await c.query('CHECKPOINT');
          await c.query('SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())', [slot]);
          const { rows } = await c.query('SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), restart_lsn)::bigint AS r FROM pg_replication_slots WHERE slot_name = $1', [slot]);
          return Number(rows[0].r) < base + 2 * MiB;
        }),
      60_000,
    );
    await until('alert resolved in Alertmanager', async () => (await listed()).length === 0);
  }, 120_000);
});
