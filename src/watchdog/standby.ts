/**
 * The standby connection of the failover rules (watchdog.standby.databaseUrl): one URL, read into the
 * same database settings every other connection uses, so TLS and timeouts work alike. A user or password
 * the URL leaves out is the watchdog's (watchdog.user / watchdog.password, else database.*). The target
 * named in alerts and `outbox status` is host:port/database: never the URL, which may carry a password.
 */
import { DATABASE_SSL_MODES, type DatabaseSslMode, type OutboxConfig } from '../config';
import { OutboxError } from '../errors';

export interface StandbyConnection {
  database: OutboxConfig['database'];
  target: string;
}

export function standbyConnection(config: OutboxConfig): StandbyConnection | undefined {
  const url = config.watchdog.standby.databaseUrl;
  if (!url) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new OutboxError('CONFIG_INVALID', 'watchdog.standby.databaseUrl (OUTBOX_WATCHDOG_STANDBY_DATABASE_URL) is not a URL: write it as postgres://user@host:5432/database.');
  }
  const sslmode = parsed.searchParams.get('sslmode');
  const database: OutboxConfig['database'] = {
    ...config.database,
    host: decodeURIComponent(parsed.hostname) || config.database.host,
    port: parsed.port ? Number(parsed.port) : 5432,
    database: decodeURIComponent(parsed.pathname.replace(/^\//, '')) || config.database.database,
    user: parsed.username ? decodeURIComponent(parsed.username) : (config.watchdog.user ?? config.database.user),
    password: parsed.password ? decodeURIComponent(parsed.password) : (config.watchdog.password ?? config.database.password),
    ssl: sslmode ? !['disable', 'allow', 'prefer'].includes(sslmode) : config.database.ssl,
    sslMode: sslmode && (DATABASE_SSL_MODES as readonly string[]).includes(sslmode) ? (sslmode as DatabaseSslMode) : sslmode ? undefined : config.database.sslMode,
  };
  return { database, target: `${database.host}:${database.port}/${database.database}` };
}
