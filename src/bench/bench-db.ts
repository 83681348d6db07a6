import type { Pool } from 'pg';
import { loadConfig, type OutboxConfig, type OutboxOptions } from '../config';
import { clientConfig, createPool, withClient } from '../db';
import { ORDERS_DDL } from '../examples/create-order';
import { provision } from '../provision';

/**
 * A throw-away database per bench run on the local stack: provisioned, with the example's orders
 * table, so a run never touches `app` and leaves nothing behind.
 */
export async function createBenchDatabase(overrides: OutboxOptions = {}): Promise<{ config: OutboxConfig; pool: Pool; drop(): Promise<void> }> {
  const base = loadConfig({ overrides });
  const name = `outbox_bench_${Date.now().toString(36)}`;
  await withClient(clientConfig(base.database, { database: 'postgres' }), (admin) => admin.query(`CREATE DATABASE ${admin.escapeIdentifier(name)}`));
  const config = loadConfig({ overrides: { ...overrides, database: { ...overrides.database, database: name } } });
  await provision(config);
  const pool = createPool(config.database, { max: 16 });
  await pool.query(ORDERS_DDL);
  return {
    config,
    pool,
    async drop() {
      await pool.end();
      await withClient(clientConfig(base.database, { database: 'postgres' }), async (c) => {
        // A slot left by a failed run would block DROP DATABASE.
        await c.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active', [name]);
        await c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`);
      });
    },
  };
}
