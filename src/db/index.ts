import { Client, Pool, escapeIdentifier, type ClientConfig, type PoolConfig } from 'pg';
import type { ConnectionOptions } from 'node:tls';
import { databaseSslMode, readPemFile, type OutboxConfig } from '../config';
import { OutboxError } from '../errors';
import { credentialFailure } from '../errors/credentials';

export { escapeIdentifier };

/** `"schema"."table"`, each part escaped: configuration never reaches SQL unescaped. */
export function qualified(schema: string, name: string): string {
  return `${escapeIdentifier(schema)}.${escapeIdentifier(name)}`;
}

export function clientConfig(database: OutboxConfig['database'], overrides: Partial<ClientConfig> = {}): ClientConfig {
  return {
    host: database.host,
    port: database.port,
    database: database.database,
    user: database.user,
    password: database.password,
    ssl: databaseTls(database),
    statement_timeout: database.statementTimeoutMs,
    connectionTimeoutMillis: 10_000,
    application_name: 'outbox-router',
    ...overrides,
  };
}

/**
 * node-postgres's TLS options for libpq's sslmode: verify-full checks the chain and the host name (Node's
 * default), verify-ca the chain only, require neither (encryption against a passive listener only).
 */
export function databaseTls(database: OutboxConfig['database']): ConnectionOptions | undefined {
  const mode = databaseSslMode(database);
  if (mode === 'disable') return undefined;
  const ca = database.sslRootCert ? readPemFile(database.sslRootCert, 'database.sslRootCert (OUTBOX_DB_SSL_ROOT_CERT)') : undefined;
  if (mode === 'require') return { rejectUnauthorized: false };
  return { rejectUnauthorized: true, ...(ca ? { ca } : {}), ...(mode === 'verify-ca' ? { checkServerIdentity: () => undefined } : {}) };
}

/** Connects, runs `body`, always disconnects. Connection failures name the target and the fix. */
export async function withClient<T>(config: ClientConfig, body: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client(config);
  // A server shutdown between statements is an 'error' event; the statement in flight rejects anyway.
  client.on('error', () => {});
  try {
    await client.connect();
  } catch (error) {
    throw connectionError(config, error);
  }
  try {
    return await body(client);
  } finally {
    await client.end().catch(() => {});
  }
}

export function connectionError(config: ClientConfig, error: unknown): OutboxError {
  const err = error as { code?: string; message?: string };
  const target = `${config.user}@${config.host}:${config.port}/${config.database}`;
  const refused = credentialFailure(error, { hop: 'postgres', target: `${config.host}:${config.port}/${config.database}`, principal: config.user, tls: Boolean(config.ssl) });
  if (refused) return refused;
  const hint =
    err.code === '3D000'
      ? 'Create the database, or set PGDATABASE to an existing one.'
      : 'Check that PostgreSQL runs and accepts TCP connections there (`npm run stack:up` for the local stack).';
  return new OutboxError('DB_UNAVAILABLE', `Cannot connect to PostgreSQL as ${target}: ${err.message ?? String(error)}. ${hint}`, {
    retriable: err.code !== '3D000',
    cause: error,
    details: { code: err.code },
  });
}

/** The pg error code (SQLSTATE) of an error, if it is one: branch on this, never on message text. */
export function pgCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/**
 * A pg Pool that survives the database going away: an idle client's error (a restart, a terminated
 * backend) is an 'error' event on the pool, and without a listener it crashes the whole process.
 * The pool drops that client by itself; we only report it.
 *
 * A client that is checked out but between statements (a writer encoding its payload inside BEGIN…
 * COMMIT, a router handler doing JavaScript work) gets the same 'error' event on the client itself,
 * where the pool has no listener: the chaos run's PostgreSQL restart crashed a process that way. Every
 * client of the pool therefore keeps a listener for its whole life; the next statement on it still
 * fails, as it must, and the caller sees that error.
 */
export function createPool(database: OutboxConfig['database'], overrides: Partial<PoolConfig> = {}, onIdleError: (error: Error) => void = () => {}): Pool {
  const pool = new Pool({ ...clientConfig(database), ...overrides });
  const report = (error: Error) => {
    try {
      onIdleError(error);
    } catch {
      // reporting must never crash the process either
    }
  };
  pool.on('error', report);
  // An idle client's error reaches `report` through the pool's 'error'; a checked-out one's only here.
  const checkedOut = new WeakSet<object>();
  pool.on('acquire', (client) => checkedOut.add(client));
  pool.on('release', (_error, client) => checkedOut.delete(client));
  pool.on('connect', (client) =>
    client.on('error', (error) => {
      if (checkedOut.has(client)) report(error);
    }),
  );
  return pool;
}
export { runCleanup, type CleanupOptions } from './delete-in-batches';
export { forgetInboxKeyFunction, inboxIdType, inboxKeyFunction, uuidInboxRefuses, type InboxIdType } from './inbox-id-type';
