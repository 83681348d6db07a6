import { randomBytes } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { Client, type ClientConfig } from 'pg';
import { POSTGRES, STACK_HOST, STACK_PORTS, stackUrls } from '../../scripts/stack/settings';

export { stackUrls };

/** A name no other test or run uses: topics, groups, slots, subjects. Lower case, `_`-free for Kafka. */
export function randomName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}

/** Same, but a valid unquoted SQL identifier (slots allow only [a-z0-9_]). */
export function randomIdentifier(prefix: string): string {
  return randomName(prefix).replace(/-/g, '_');
}

/** The version-matrix projects (jest.config.js) point the tests at another PostgreSQL cluster. */
export interface MatrixTarget {
  version: string;
  port: number;
}

/** The PostgreSQL server this test run uses: the stack's (55432), or the matrix cluster of its jest project. */
export function testPostgresPort(): number {
  const target = (globalThis as { OUTBOX_TEST_POSTGRES?: MatrixTarget }).OUTBOX_TEST_POSTGRES;
  return target?.port ?? STACK_PORTS.postgres;
}

export function pgConfig(database: string = POSTGRES.database): ClientConfig {
  return { host: STACK_HOST, port: testPostgresPort(), user: POSTGRES.user, password: POSTGRES.password, database };
}

export async function withClient<T>(database: string, body: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client(pgConfig(database));
  await client.connect();
  try {
    return await body(client);
  } finally {
    await client.end();
  }
}

export interface FreshDatabase {
  name: string;
  config: ClientConfig;
  drop(): Promise<void>;
}

/**
 * OUTBOX_TEST_ADMIN=managed runs the suite as managed PostgreSQL would have it: each fresh database is
 * owned by an admin of its own with only LOGIN CREATEROLE REPLICATION (no superuser; PostgreSQL 16+), and
 * testConfig() provisions and deploys as that admin (docs/managed-postgres.md). The superuser still sets
 * up scenes (tables, faults), as a provider's console would. Off by default.
 */
export const MANAGED_ADMIN = process.env.OUTBOX_TEST_ADMIN === 'managed';
export const MANAGED_ADMIN_PASSWORD = 'managed-admin-suite-1';
const managedAdmins = new Map<string, string>();

/** The admin role a fresh database was given under OUTBOX_TEST_ADMIN=managed, else undefined. */
export function managedAdminOf(database: string): string | undefined {
  return managedAdmins.get(database);
}

/** A new, empty database for one test file; `drop()` removes it even while clients are connected. */
export async function freshDatabase(prefix = 't'): Promise<FreshDatabase> {
  const name = randomIdentifier(prefix);
  await withClient('postgres', (c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`));
  if (MANAGED_ADMIN) {
    const admin = `adm_${name}`.slice(0, 63);
    await withClient('postgres', async (c) => {
      await c.query(`CREATE ROLE ${c.escapeIdentifier(admin)} LOGIN CREATEROLE REPLICATION PASSWORD '${MANAGED_ADMIN_PASSWORD}'`);
      await c.query(`ALTER DATABASE ${c.escapeIdentifier(name)} OWNER TO ${c.escapeIdentifier(admin)}`);
    });
    managedAdmins.set(name, admin);
  }
  return {
    name,
    config: pgConfig(name),
    drop: () =>
      withClient('postgres', async (c) => {
        // Slots block DROP DATABASE; a failed test may have left one.
        await c.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active', [name]);
        await c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`);
      }).then(() => undefined),
  };
}

export function testKafka(clientId = randomName('test')): Kafka {
  return new Kafka({ clientId, brokers: stackUrls.kafkaBrokers, logLevel: logLevel.WARN, retry: { retries: 5 } });
}
