import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Kafka, logLevel, type Admin } from 'kafkajs';
import { Client } from 'pg';
import { applyKafkaAcls, planKafkaAcls } from '../../src/acls';
import { loadConfig, type OutboxConfig, type OutboxOptions } from '../../src/config';
import { isOutboxError, type OutboxError } from '../../src/errors';
import { PROJECT_ROOT } from '../../scripts/stack/paths';
import { resolveStackConfig } from '../../scripts/stack/config';
import { isAlive } from '../../scripts/stack/processes';
import { secureCerts, secureStackPaths } from '../../scripts/stack/secure/secure-stack';
import { secureOutboxOptions } from '../../scripts/stack/secure/secure-config';
import { SECURE_HTTP_USERS, SECURE_KAFKA_USERS, SECURE_PORTS, SECURE_POSTGRES, secureUrls, type SecureKafkaUser } from '../../scripts/stack/secure/secure-settings';
import { randomIdentifier } from './stack-env';

/**
 * The secure profile of the native stack (`stack up --profile secure`): TLS and credentials on every hop.
 * Its tests run when it runs (CI starts it for a secure pass) and say why they are skipped otherwise.
 */
export const securePaths = secureStackPaths(resolveStackConfig({}));
export const certs = secureCerts(securePaths);

export function secureStackRunning(): boolean {
  const pidFile = join(securePaths.pidDir, 'kafka.pid');
  if (!existsSync(certs.caCert) || !existsSync(pidFile)) return false;
  const pid = Number.parseInt(readFileSync(pidFile, 'utf8'), 10);
  return Number.isInteger(pid) && isAlive(pid);
}

/** `describe` on the secure stack, `describe.skip` with the reason printed elsewhere. */
export function describeSecure(file: string): jest.Describe {
  if (secureStackRunning()) return describe;
  process.stderr.write(`[${file}] skipped: the secure stack is not running; \`npm run stack:up -- --profile secure\` runs these tests (CI's secure pass does).\n`);
  return describe.skip;
}

export const SECURE_ROLE_PASSWORDS = SECURE_POSTGRES.roles;

export function secureAdminPg(database = 'postgres'): Client {
  return new Client({
    host: '127.0.0.1', port: SECURE_PORTS.postgres, user: SECURE_POSTGRES.user, password: SECURE_POSTGRES.password, database,
    ssl: { ca: readFileSync(certs.caCert), rejectUnauthorized: true },
  });
}

export async function freshSecureDatabase(prefix: string): Promise<{ name: string; drop(): Promise<void> }> {
  const name = randomIdentifier(prefix);
  const admin = secureAdminPg();
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  return {
    name,
    drop: async () => {
      const c = secureAdminPg();
      await c.connect();
      try {
        await c.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active', [name]);
        await c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/**
 * Config for one part of the pipeline on the secure stack, as its operator would write it: its Kafka
 * principal (SCRAM-SHA-512), the CA for every hop, basic auth to Connect and the registry, PostgreSQL
 * with verify-full. Role names are the file's own; their passwords the stack's (the worker knows the CDC one).
 */
export function secureConfig(database: string, principal: SecureKafkaUser, overrides: OutboxOptions = {}, suffix = randomIdentifier('r').slice(-8)): OutboxConfig {
  const base = secureOutboxOptions(certs, database, principal);
  return loadConfig({
    env: {},
    overrides: {
      ...base,
      ...overrides,
      database: { ...base.database, ...overrides.database },
      roles: { cdc: `cdc_${suffix}`, app: `app_${suffix}`, monitor: `mon_${suffix}`, router: `rt_${suffix}`, relay: `rl_${suffix}`, ...base.roles, ...overrides.roles },
      kafka: { ...base.kafka, ...overrides.kafka },
      connector: { slotName: randomIdentifier('slot'), name: randomIdentifier('conn'), ...overrides.connector },
    },
  });
}

/** The same settings as the environment the CLI reads (what an operator exports), secrets included. */
export function secureEnv(database: string, principal: SecureKafkaUser, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PGHOST: '127.0.0.1', PGPORT: String(SECURE_PORTS.postgres), PGDATABASE: database, PGUSER: SECURE_POSTGRES.user, PGPASSWORD: SECURE_POSTGRES.password,
    OUTBOX_DB_SSL_MODE: 'verify-full', OUTBOX_DB_SSL_ROOT_CERT: certs.caCert,
    KAFKA_BROKERS: secureUrls.kafkaBrokers.join(','), OUTBOX_KAFKA_SSL_CA_FILE: certs.caCert,
    OUTBOX_KAFKA_SASL_MECHANISM: 'scram-sha-512', OUTBOX_KAFKA_SASL_USERNAME: principal, OUTBOX_KAFKA_SASL_PASSWORD: SECURE_KAFKA_USERS[principal],
    OUTBOX_CONNECT_URL: secureUrls.connect, OUTBOX_CONNECT_USERNAME: SECURE_HTTP_USERS.connect.username, OUTBOX_CONNECT_PASSWORD: SECURE_HTTP_USERS.connect.password, OUTBOX_CONNECT_CA_FILE: certs.caCert,
    OUTBOX_REGISTRY_URL: secureUrls.registry, OUTBOX_REGISTRY_USERNAME: SECURE_HTTP_USERS.registry.username, OUTBOX_REGISTRY_PASSWORD: SECURE_HTTP_USERS.registry.password, OUTBOX_REGISTRY_CA_FILE: certs.caCert,
    ...extra,
  };
}

/** Every secret of the secure stack: none may appear in any output. */
export const SECURE_SECRETS: readonly string[] = [
  ...Object.values(SECURE_KAFKA_USERS), ...Object.values(SECURE_ROLE_PASSWORDS), SECURE_POSTGRES.password,
  SECURE_HTTP_USERS.connect.password, SECURE_HTTP_USERS.registry.password,
];

export function secureKafka(principal: SecureKafkaUser): Kafka {
  return new Kafka({
    clientId: `test-${principal}`,
    brokers: [...secureUrls.kafkaBrokers],
    ssl: { ca: [readFileSync(certs.caCert)], rejectUnauthorized: true },
    sasl: { mechanism: 'scram-sha-512', username: principal, password: SECURE_KAFKA_USERS[principal] },
    logLevel: logLevel.NOTHING,
    retry: { retries: 2, initialRetryTime: 100 },
  });
}

export async function withSecureAdminClient<T>(use: (admin: Admin) => Promise<T>): Promise<T> {
  const admin = secureKafka('outbox-admin').admin();
  await admin.connect();
  try {
    return await use(admin);
  } finally {
    await admin.disconnect();
  }
}

/** The ACLs this config's pipeline needs (`outbox kafka:acls`), created by the stack's admin, as an operator would. */
export async function applyAclsFor(config: OutboxConfig): Promise<number> {
  const { plan } = planKafkaAcls(config);
  return withSecureAdminClient((admin) => applyKafkaAcls(admin, plan));
}

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

const CLI = join(PROJECT_ROOT, 'dist', 'cli', 'main.js');

/** `node dist/cli/main.js …` with only the given environment (plus PATH), as a user runs it. */
export function runCli(args: string[], env: Record<string, string>, timeoutMs = 120_000, cli = CLI): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, '--log-format', 'json', ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** What `work` rejects with, whatever it is (the classification under test may be the caller's). */
export async function failureOf(work: Promise<unknown>): Promise<unknown> {
  try {
    await work;
  } catch (error) {
    return error;
  }
  throw new Error('expected a failure, but it succeeded');
}

/** The one clear error of a refused hop: its code, the parts its message must name, and none of the stack's secrets. */
export function expectRefusal(error: unknown, code: string, ...parts: string[]): OutboxError {
  if (!isOutboxError(error)) throw new Error(`expected an OutboxError ${code}, got ${String((error as Error)?.stack ?? error)}`);
  expect({ code: error.code }).toEqual({ code });
  for (const part of parts) expect(error.message).toContain(part);
  for (const secret of [...SECURE_SECRETS, 'wrong-password-xyz']) expect(error.message).not.toContain(secret);
  return error;
}
