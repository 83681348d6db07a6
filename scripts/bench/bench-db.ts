import { randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import { loadConfig, type OutboxConfig, type OutboxOptions } from 'outbox-router/config';
import { clientConfig, createPool, withClient } from 'outbox-router/db';
import { provision } from 'outbox-router/provision';
import { ORDERS_DDL } from '../../examples/create-order';

/**
 * A throw-away database per bench run on the local stack: provisioned, with the example's orders
 * table, so a run never touches `app` and leaves nothing behind.
 */
export interface BenchDatabase {
  config: OutboxConfig;
  pool: Pool;
  drop(): Promise<void>;
}

/** Passwords for the five roles of a bench's throw-away database: this run's only, never printed. */
export function throwawayRoles(): NonNullable<OutboxOptions['roles']> {
  const secret = () => randomBytes(18).toString('base64url');
  return { cdcPassword: secret(), appPassword: secret(), monitorPassword: secret(), routerPassword: secret(), relayPassword: secret() };
}

export async function createBenchDatabase(overrides: OutboxOptions = {}, suffix = Date.now().toString(36)): Promise<BenchDatabase> {
  const base = loadConfig({ overrides });
  const name = `outbox_bench_${suffix}`;
  await withClient(clientConfig(base.database, { database: 'postgres' }), (admin) => admin.query(`CREATE DATABASE ${admin.escapeIdentifier(name)}`));
  const config = loadConfig({ overrides: { ...overrides, database: { ...overrides.database, database: name } } });
  const pool = createPool(config.database, { max: 16 });
  const drop = async () => {
    await pool.end().catch(() => {});
    await withClient(clientConfig(base.database, { database: 'postgres' }), async (c) => {
        // A slot left by a failed run would block DROP DATABASE.
        await c.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active', [name]);
        await c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`);
      });
  };
  try {
    await provision(config);
    await pool.query(ORDERS_DDL);
  } catch (error) {
    await drop().catch(() => {});
    throw error;
  }
  return { config, pool, drop };
}
