import type { Pool } from 'pg';
import type { OutboxConfig } from '../../src/config';
import { connectorStatus, deleteConnector, deployConnector } from '../../src/connector';
import { createPool } from '../../src/db';
import { createLogger } from '../../src/log';
import { provision } from '../../src/provision';
import { createConnectorSupervisor } from '../../src/watchdog';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, type FreshDatabase } from '../support/stack-env';
import { until } from '../support/until';

jest.setTimeout(180_000);

/**
 * The watchdog's connector supervisor (--restart-failed-connector) on a real Debezium task that FAILS:
 * an outbox row larger than the producer's max.request.size, written straight into the table (the
 * writer would refuse it), is a poison record, so this also shows the backoff that keeps a connector
 * that fails for good from being restarted in a tight loop.
 */
describe('connector supervisor', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;

  beforeAll(async () => {
    db = await freshDatabase('supervisor');
    const prefix = randomName('sup').replace(/-/g, '');
    config = testConfig(db.name, { connector: { topicPrefix: prefix, topicReplacement: `${prefix}.outbox.event.\${routedByValue}` } });
    await provision(config);
    pool = createPool(config.database, { max: 2 });
    await deployConnector(config);
  });

  afterAll(async () => {
    await deleteConnector(config, { dropSlot: true, force: true }).catch(() => {});
    await pool?.end();
    await db?.drop();
  });

  it('restarts a FAILED task, then backs off while it keeps failing, and reports every restart', async () => {
    // A row larger than Kafka takes fails the task for good. db:provision's outbox_payload_size check
    // refuses such rows now, so drop it here: this stands for a database provisioned before the limits.
    await pool.query('ALTER TABLE outbox DROP CONSTRAINT outbox_payload_size');
    await pool.query(
      `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type)
       VALUES (gen_random_uuid(), 'order', 'poison', 'OrderCreated', convert_to(repeat('x', $1::int), 'UTF8'), 'application/json')`,
      [config.outbox.maxPayloadBytes * 2 + 2 ** 20],
    );
    await until('a FAILED task', () => connectorStatus(config), (status) => status.tasks.some((t) => t.state === 'FAILED'), 60_000);
    let clock = Date.now();
    const restarts: number[] = [];
    const supervisor = createConnectorSupervisor({
      config,
      logger: createLogger({ level: 'silent' }),
      backoff: { initialDelayMs: 5_000, maxDelayMs: 60_000 },
      now: () => clock,
      onRestart: (info) => restarts.push(info.attempt),
    });
    expect(await supervisor.check()).toBe('restarted');
    // The restarted task meets the same record and fails again; within the backoff nothing is restarted.
    const failedAgain = Date.now() + 60_000;
    let restarted = false; // the FAILED state from before the restart does not count
    for (;;) {
      const status = await connectorStatus(config);
      const failed = status.tasks.some((t) => t.state === 'FAILED');
      if (!failed) restarted = true;
      if (failed && restarted) break;
      if (Date.now() > failedAgain) throw new Error('the restarted task did not fail again');
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(await supervisor.check()).toBe('waiting');
    clock += 5_000; // the first backoff has passed
    expect(await supervisor.check()).toBe('restarted');
    expect(restarts).toEqual([1, 2]);
    expect(supervisor.stats()).toEqual({ restarts: 2, consecutiveFailures: 2 });
  });
});
