import { STACK_PORTS } from '../stack/settings';

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

/**
 * Is this database the local development stack (a loopback address on the stack's PostgreSQL port)?
 * Conveniences that are safe only there (published default passwords, a default consumer name) are
 * refused anywhere else, so a production database never silently gets them.
 */
export function isLocalStackDatabase(database: { host: string; port: number }): boolean {
  return LOOPBACK.has(database.host.toLowerCase()) && database.port === STACK_PORTS.postgres;
}
