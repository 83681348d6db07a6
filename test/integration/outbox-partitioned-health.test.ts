/**
 * The outbox's health sample on a partitioned outbox (outbox.cleanupMode 'partition'), real PostgreSQL:
 * the root has no statistics or storage of its own, so rows and bytes are the partitions' sums (the
 * sample read "no such table" before); the headroom is the time until INSERTs find no partition, and
 * OutboxPartitionsRunningOut turns critical when the cleanup has not kept windows ahead. A pgoutput
 * slot registered for the cleanup stands in for Debezium (no connector is needed to make partitions).
 */
import type { Pool } from 'pg';
import { registerCleanupSlot, runOutboxCleanup } from '../../src/cleanup';
import { createCodec, JSON_CONTENT_TYPE } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { createOutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import { createWatchdog, sampleOutbox } from '../../src/watchdog';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(120_000);
const WINDOW = 60;
const AHEAD = 3;

describe('outbox health of a partitioned outbox', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;

  beforeAll(async () => {
    db = await freshDatabase('parthealth');
    config = testConfig(db.name, { outbox: { cleanupMode: 'partition', partitionSeconds: WINDOW, partitionsAhead: AHEAD } });
    await provision(config);
    pool = createPool(config.database, { max: 2 });
    await pool.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [config.connector.slotName]);
    await registerCleanupSlot(pool, config.outbox, config.connector.slotName, 'test');
    await runOutboxCleanup(pool, { outbox: config.outbox, slotName: config.connector.slotName, batchSize: 100, maxBatches: 1 });
  });

  afterAll(async () => {
    await pool?.query('SELECT pg_drop_replication_slot($1)', [config.connector.slotName]).catch(() => {});
    await pool?.end();
    await db?.drop();
  });

  it('sums rows and bytes over the partitions, and reports the time left before INSERTs find no partition', async () => {
    const client = await pool.connect();
    const writer = createOutboxWriter({ outbox: config.outbox, codec: createCodec({ registry: config.registry }), contentType: JSON_CONTENT_TYPE });
    try {
      await client.query('BEGIN');
      await writer.writeEvents(client, Array.from({ length: 500 }, (_, n) => ({ aggregateType: 'note', aggregateId: `k${n % 7}`, type: 'Noted', payload: { n } })));
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    await pool.query('ANALYZE outbox');
    const sample = await sampleOutbox(pool, { schema: 'public', table: 'outbox', backlogCap: 1_000 });
    expect(sample.present).toBe(true);
    expect(sample.estimatedRows).toBe(500);
    expect(sample.totalBytes).toBeGreaterThan(8192);
    expect(sample.pendingRows).toBe(500);
    // The current window and AHEAD more: between AHEAD and AHEAD + 1 windows from now.
    expect(sample.partitionHeadroomSeconds).toBeGreaterThan(AHEAD * WINDOW - 5);
    expect(sample.partitionHeadroomSeconds).toBeLessThanOrEqual((AHEAD + 1) * WINDOW);
  });

  it('turns OutboxPartitionsRunningOut critical when only the current window has a partition', async () => {
    const healthy = createWatchdog({ config, instant: true, deliver: false });
    try {
      await healthy.pollOnce();
      expect(healthy.statuses().find((s) => s.rule === 'OutboxPartitionsRunningOut')?.level ?? 'ok').toBe('ok');
    } finally {
      await healthy.stop(0);
    }
    // As if the cleanup had not run for AHEAD windows: the partitions ahead are gone (all empty).
    const { rows } = await pool.query<{ name: string }>(
      "SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'outbox'::regclass AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.tableoid = c.oid) ORDER BY 1",
    );
    const current = (await pool.query<{ part: string }>("SELECT tableoid::regclass::text AS part FROM outbox LIMIT 1")).rows[0]?.part;
    for (const { name } of rows) if (name !== current) await pool.query(`DROP TABLE ${name}`);
    const watchdog = createWatchdog({ config, instant: true, deliver: false });
    try {
      const result = await watchdog.pollOnce();
      expect(result.outbox?.partitionHeadroomSeconds).toBeLessThan(WINDOW);
      const alert = watchdog.statuses().find((s) => s.rule === 'OutboxPartitionsRunningOut');
      expect(alert?.level).toBe('critical');
      expect(alert?.summary).toContain('every outbox INSERT fails');
    } finally {
      await watchdog.stop(0);
    }
  });
});
