/**
 * CDC across a PostgreSQL primary failover, on the stack's cluster profile (PostgreSQL 17 primary and
 * synchronous standby behind the proxy on the stack's address, three brokers, two Connect workers).
 * Runs only there; CI starts the cluster for its cluster pass.
 *
 * Writers commit while the primary is SIGKILLed and the standby promoted. What the new primary holds
 * is the truth of what committed (a COMMIT cut by the kill is ambiguous to its writer: the row tells),
 * and the topic must carry exactly that set: every event committed before, during and after the
 * failover (nothing lost: the failover slot on the standby continues where Debezium stopped), and none
 * that rolled back or never committed (nothing phantom: synchronized_standby_slots kept Debezium from
 * reading WAL the standby did not have). Duplicates are allowed (at-least-once; the inbox dedups).
 */
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { createCodec, topicForReplacement } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { connectorStatus, deleteConnector, deployConnector } from '../../src/connector';
import { createPool } from '../../src/db';
import { createOutboxWriter, type OutboxWriter } from '../../src/producer';
import { createWatchdog } from '../../src/watchdog';
import { provision } from '../../src/provision';
import { createStack } from '../../scripts/stack';
import { pairStatus } from '../../scripts/stack/postgres-ha';
import { CLUSTER_CLIENTS } from '../../scripts/stack/settings';
import { collect } from '../support/consume';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

jest.setTimeout(300_000);

const stack = createStack();
const onCluster = stack.profile === 'cluster';
if (!onCluster) {
  process.stderr.write(`[cluster-failover] skipped: the stack in ${stack.paths.stateDir} runs the ${stack.profile} profile; \`npm run stack:up -- --profile cluster\` (after \`stack:down\`) runs these tests.\n`);
}
const until = waitsUpTo(120_000, 250);

interface Attempt {
  id: string;
  aggregateId: string;
  outcome: 'committed' | 'rolled back' | 'ambiguous' | 'failed';
}

/** One transaction: a business row and its event; every fifth one rolled back on purpose. */
async function attempt(pool: Pool, writer: OutboxWriter, n: number): Promise<Attempt> {
  const aggregateId = `acct-${n % 7}`;
  const rollBack = n % 5 === 4;
  let client;
  try {
    client = await pool.connect();
  } catch {
    return { id: '', aggregateId, outcome: 'failed' };
  }
  let id = '';
  let committing = false;
  try {
    await client.query('BEGIN');
    const business = randomUUID();
    await client.query('INSERT INTO failover_business (id, aggregate_id) VALUES ($1, $2)', [business, aggregateId]);
    const written = await writer.writeEvent(client, { aggregateType: 'account', aggregateId, type: 'AccountNoted', payload: { n, business } });
    id = written.id;
    if (rollBack) {
      await client.query('ROLLBACK');
      return { id, aggregateId, outcome: 'rolled back' };
    }
    committing = true;
    await client.query('COMMIT');
    return { id, aggregateId, outcome: 'committed' };
  } catch {
    client.release(true);
    client = undefined;
    // A COMMIT cut by the kill may or may not have committed: the new primary will tell.
    return { id, aggregateId, outcome: committing ? 'ambiguous' : 'failed' };
  } finally {
    client?.release();
  }
}

(onCluster ? describe : describe.skip)('a failover without failover slots (cluster profile, connector.slotFailover off)', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;

  afterAll(async () => {
    await deleteConnector(config, { dropSlot: true, force: true }).catch(() => {});
    await pool?.end().catch(() => {});
    await db?.drop().catch(() => {});
    if ((await pairStatus(stack.paths)).nodes.some((n) => n.role === 'down')) await stack.rebuildStandby();
  });

  it('is named, never silent: the task fails, connector:deploy and the watchdog say SLOT_MISSING_AFTER_FAILOVER, nothing recreates the slot', async () => {
    db = await freshDatabase('nofailover');
    const prefix = randomName('t').replace(/-/g, '');
    config = testConfig(db.name, {
      connector: { topicReplacement: `${prefix}.outbox.event.\${routedByValue}`, topicPrefix: prefix, slotFailover: 'off' },
      kafka: { brokers: [...CLUSTER_CLIENTS.kafka.brokers] },
      connect: { fallbackUrls: [...CLUSTER_CLIENTS.connect.fallbackUrls] },
    });
    await provision(config);
    pool = createPool(config.database, { max: 2, connectionTimeoutMillis: 5_000 });
    pool.on('error', () => {});
    const codec = createCodec({ registry: config.registry, autoRegister: true, topicFor: topicForReplacement(config.connector.topicReplacement) });
    const writer = createOutboxWriter({ outbox: config.outbox, codec, contentType: 'application/json' });
    await deployConnector(config);
    const slot = config.connector.slotName;
    expect((await pool.query<{ failover: boolean }>('SELECT failover FROM pg_replication_slots WHERE slot_name = $1', [slot])).rows[0]?.failover).toBe(false);
    for (let n = 0; n < 10; n++) await attempt(pool, writer, n);
    // Connect has stored an offset for the slot (it flushes every second on the stack).
    const { createConnectClient } = await import('../../src/connector');
    const connect = createConnectClient(config.connect);
    await until('a stored offset', async () => (await connect.offsets(config.connector.name)).length > 0);

    const report = await stack.failoverPostgres();
    expect(report.standbySlots.find((x) => x.slot_name === slot)).toBeUndefined();
    for (let n = 10; n < 20; n++) await attempt(pool, writer, n);
    // Debezium does not recreate the slot: its task fails, naming the position that is gone (measured: about 15 s
    // after the kill, while it retried the cut connection). A new slot at the end of WAL would have skipped 10 events.
    const failed = await until('the task FAILED', () => connect.status(config.connector.name), (st) => st?.tasks[0]?.state === 'FAILED');
    expect(failed?.tasks[0]?.trace).toMatch(/no longer available on the server/);
    expect((await pool.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [slot])).rowCount).toBe(0);
    // connector:deploy refuses with the cause, also for the unchanged config (it used to say only CONNECTOR_FAILED,
    // "slot dropped or recreated"), and never recreates the slot.
    const refusal = await deployConnector(config).then(() => undefined, (e: unknown) => e as { code?: string; message?: string });
    expect(refusal?.code).toBe('SLOT_MISSING_AFTER_FAILOVER');
    expect(refusal?.message).toMatch(/this server is on WAL timeline \d+, so it was promoted from a standby/);
    expect((await pool.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [slot])).rowCount).toBe(0);
    // The watchdog names it too: SlotMissing, critical, with the code.
    const watchdog = createWatchdog({ config: { ...config, watchdog: { ...config.watchdog, cluster: 'failover-test' } }, instant: true, deliver: false });
    try {
      await watchdog.pollOnce();
      const missing = watchdog.statuses().find((x) => x.rule === 'SlotMissing');
      expect(missing).toMatchObject({ slot, level: 'critical' });
      expect(missing?.summary).toMatch(/SLOT_MISSING_AFTER_FAILOVER/);
    } finally {
      await watchdog.stop(0);
    }
  });
});

(onCluster ? describe : describe.skip)('CDC across a PostgreSQL primary failover (cluster profile)', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let writer: OutboxWriter;
  let topic: string;

  beforeAll(async () => {
    db = await freshDatabase('failover');
    const prefix = randomName('t').replace(/-/g, '');
    const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
    config = testConfig(db.name, {
      connector: { topicReplacement, topicPrefix: prefix },
      // The whole cluster, as production configures it: bootstrap from any broker, reach Connect through either worker.
      kafka: { brokers: [...CLUSTER_CLIENTS.kafka.brokers] },
      connect: { fallbackUrls: [...CLUSTER_CLIENTS.connect.fallbackUrls] },
    });
    topic = topicForReplacement(topicReplacement)('account');
    await provision(config);
    pool = createPool(config.database, { max: 6, connectionTimeoutMillis: 5_000 });
    pool.on('error', () => {});
    await pool.query('CREATE TABLE failover_business (id uuid PRIMARY KEY, aggregate_id text NOT NULL)');
    const codec = createCodec({ registry: config.registry, autoRegister: true, topicFor: topicForReplacement(topicReplacement) });
    writer = createOutboxWriter({ outbox: config.outbox, codec, contentType: 'application/json' });
    await deployConnector(config);
  });

  afterAll(async () => {
    await deleteConnector(config, { dropSlot: true, force: true }).catch(() => {});
    await pool?.end().catch(() => {});
    await db?.drop().catch(() => {});
    // The next test file finds the pair whole again.
    if ((await pairStatus(stack.paths)).nodes.some((n) => n.role === 'down')) await stack.rebuildStandby();
  });

  it('publishes every event committed around the kill exactly as the new primary holds them, and nothing rolled back', async () => {
    // The connector's slot is a failover slot, and the standby holds a synced, persistent copy of it.
    const slot = config.connector.slotName;
    const { rows } = await pool.query<{ failover: boolean }>('SELECT failover FROM pg_replication_slots WHERE slot_name = $1', [slot]);
    expect(rows[0]?.failover).toBe(true);

    const attempts: Attempt[] = [];
    for (let n = 0; n < 40; n++) attempts.push(await attempt(pool, writer, n));
    await until('the standby has the slot synced', () => pairStatus(stack.paths), (s) =>
      s.nodes.some((node) => node.role === 'standby' && (node.slots ?? []).some((x) => x.slot_name === slot && x.synced && !x.temporary)),
    );

    // Writers keep committing through the kill, the promotion and the proxy's switch.
    let writing = true;
    let n = 40;
    const background = (async () => {
      while (writing) {
        attempts.push(await attempt(pool, writer, n++));
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await new Promise((r) => setTimeout(r, 1_000));
    const report = await stack.failoverPostgres();
    const standbySlot = report.standbySlots.find((s) => s.slot_name === slot);
    expect(standbySlot).toMatchObject({ synced: true, temporary: false, invalidation_reason: null });
    expect(report.promotedSlots.find((s) => s.slot_name === slot)).toMatchObject({ failover: true, invalidation_reason: null });
    await until('a commit on the new primary', async () => (await attempt(pool, writer, n++)).outcome === 'committed');
    await new Promise((r) => setTimeout(r, 2_000));
    writing = false;
    await background;

    // The truth after the failover: which business rows (so which events) the new primary has.
    const { rows: present } = await pool.query<{ id: string }>(`SELECT id::text FROM ${config.outbox.schema}.${config.outbox.table}`);
    const committed = new Set(present.map((r) => r.id));
    const claimedCommitted = attempts.filter((a) => a.outcome === 'committed').map((a) => a.id);
    // Synchronous replication: an acknowledged COMMIT survives the failover.
    expect(claimedCommitted.filter((id) => !committed.has(id))).toEqual([]);
    const rolledBack = attempts.filter((a) => a.outcome === 'rolled back' || a.outcome === 'failed').map((a) => a.id).filter(Boolean);
    expect(rolledBack.filter((id) => committed.has(id))).toEqual([]);
    expect(committed.size).toBeGreaterThan(40);

    // Debezium continues on the new primary (its task may fail once on the cut connection: restart it as the supervisor would).
    await until('the connector RUNNING after the failover', async () => {
      const status = await connectorStatus(config).catch(() => undefined);
      if (status?.tasks.some((t) => t.state === 'FAILED')) {
        const { createConnectClient } = await import('../../src/connector');
        await createConnectClient(config.connect).restart(config.connector.name).catch(() => {});
      }
      return status?.state === 'RUNNING' && (status.tasks[0]?.state ?? '') === 'RUNNING';
    });
    const records = await collect([topic], (rs) => [...committed].every((id) => rs.some((r) => r.headers.id === id)), 180_000);
    const onTopic = new Set(records.map((r) => r.headers.id));
    expect([...committed].filter((id) => !onTopic.has(id))).toEqual([]);
    expect([...onTopic].filter((id) => !committed.has(id as string))).toEqual([]);
    process.stderr.write(
      `[cluster-failover] ${attempts.length} attempts: ${claimedCommitted.length} acknowledged, ${committed.size} committed on the new primary, ` +
        `${attempts.filter((a) => a.outcome === 'ambiguous').length} ambiguous, ${rolledBack.length} rolled back or failed; ${records.length} records on the topic ` +
        `(${records.length - onTopic.size} duplicates); kill → promoted ${report.killToPromotedMs} ms, kill → proxy ${report.killToProxySwitchedMs} ms\n`,
    );

    // The old primary comes back as the standby, and the slot is synced to it again: the next failover is covered.
    const rebuilt = await stack.rebuildStandby();
    expect(rebuilt.standby).toBe(report.from);
    await attempt(pool, writer, n++);
    await until('the rebuilt standby has the slot synced', () => pairStatus(stack.paths), (s) =>
      s.nodes.some((node) => node.name === report.from && node.role === 'standby' && (node.slots ?? []).some((x) => x.slot_name === slot && x.synced && !x.temporary)),
    );
  });
});
