/**
 * The pure part of the PostgreSQL primary + standby pair (postgres-ha.ts): node names and ports, the
 * settings each role needs, the standby's conninfo, and the proxy's target file. No processes, no I/O.
 */
import { OutboxError } from 'outbox-router/errors';
import { POSTGRES, STACK_HOST, STACK_PORTS } from './settings';

/** The newest PostgreSQL 17 Maven Central serves (zonky's server builds, see postgres-versions.ts). */
export const HA_POSTGRES_VERSION = '17.12.0';

export const NODE_NAMES = Object.freeze(['a', 'b'] as const);
export type NodeName = (typeof NODE_NAMES)[number];
export type HaRole = 'primary' | 'standby';

export interface HaPorts {
  a: number;
  b: number;
  /** The stable address clients use: the proxy forwards it to whichever node is primary. */
  proxy: number;
}

/** The cluster profile's ports. The proxy takes the single-node stack's PostgreSQL port, so every default still works. */
export const HA_PORTS: HaPorts = Object.freeze({ a: 55435, b: 55436, proxy: STACK_PORTS.postgres });

export const peerOf = (name: NodeName): NodeName => (name === 'a' ? 'b' : 'a');

/**
 * The name a node has towards its primary: its physical slot there, its `application_name` (which
 * `synchronous_standby_names` matches) and the slot `synchronized_standby_slots` waits for.
 */
export const standbyName = (name: NodeName): string => `node_${name}`;

export function validatePorts(ports: HaPorts): HaPorts {
  const values = [ports.a, ports.b, ports.proxy];
  if (values.some((p) => !Number.isInteger(p) || p < 1 || p > 65_535) || new Set(values).size !== 3) {
    throw new OutboxError('CONFIG_INVALID', `The PostgreSQL pair needs three different ports between 1 and 65535 (node a, node b, proxy); got ${values.join(', ')}.`);
  }
  return Object.freeze({ ...ports });
}

/**
 * Lines appended to the stack's own settings (connect/postgresql.conf) on both nodes: what does not
 * change with the role, so a role swap never needs a restart.
 */
export const PAIR_CONF = [
  '# primary + standby pair (scripts/stack/postgres-ha.ts): the same on both nodes, whatever their role',
  'hot_standby = on',
  // Without it the primary may remove rows a standby query, or a synced slot's catalog_xmin, still needs.
  'hot_standby_feedback = on',
  // PG 17: the standby's slot-sync worker copies the primary's failover slots (it only runs on a standby).
  'sync_replication_slots = on',
  // pg_rewind needs hint-bit changes in the WAL (or data checksums) to bring a killed primary back as a standby.
  'wal_log_hints = on',
  // A standby asks for missing WAL again after 0.5 s instead of 5 s: a new standby (whose copy holds no
  // WAL) starts streaming 4.5 s sooner, and one whose primary restarted reconnects as soon.
  'wal_retrieve_retry_interval = 500ms',
].join('\n');

/** The standby's connection to its primary. `dbname` is required by slot sync; the password comes from `passfile`. */
export function primaryConninfo(self: NodeName, primaryPort: number, passfile: string): string {
  return [
    `host=${STACK_HOST}`,
    `port=${primaryPort}`,
    `user=${POSTGRES.user}`,
    `passfile=${quoteConninfo(passfile)}`,
    `dbname=${POSTGRES.database}`,
    `application_name=${standbyName(self)}`,
  ].join(' ');
}

/** A libpq conninfo value: quoted when it holds a space, a quote or a backslash. */
export function quoteConninfo(value: string): string {
  return /[\s'\\]/.test(value) || value === '' ? `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'` : value;
}

/** The passfile line for the stack's superuser on 127.0.0.1 (any port, any database). */
export const passfileLine = (): string => `${STACK_HOST}:*:*:${POSTGRES.user}:${POSTGRES.password.replace(/\\/g, '\\\\').replace(/:/g, '\\:')}\n`;

export interface RoleOptions {
  /** The peer's port (a standby connects to it). */
  peerPort: number;
  passfile: string;
  /**
   * Primary only: wait for the standby. True once it streams; false while there is none (just after a
   * failover), since a primary waiting for a missing synchronous standby blocks every commit, and one
   * listing it in `synchronized_standby_slots` blocks every logical walsender.
   */
  withStandby: boolean;
}

/**
 * The role-dependent settings, each always present (empty = off) so that writing them replaces the
 * other role's. Synchronous replication (synchronous_commit = on, from connect/postgresql.conf) because
 * the chaos run demands zero loss of acknowledged commits across a failover: with asynchronous
 * replication a commit the primary acknowledged can be missing on the promoted standby.
 */
export function roleSettings(role: HaRole, self: NodeName, options: RoleOptions): Record<string, string> {
  const peer = standbyName(peerOf(self));
  if (role === 'primary') {
    return {
      synchronous_standby_names: options.withStandby ? peer : '',
      synchronized_standby_slots: options.withStandby ? peer : '',
      primary_conninfo: '',
      primary_slot_name: '',
    };
  }
  return {
    synchronous_standby_names: '',
    synchronized_standby_slots: '',
    primary_conninfo: primaryConninfo(self, options.peerPort, options.passfile),
    primary_slot_name: standbyName(self),
  };
}

/** A configuration file's string: the file's parser reads backslash escapes, SQL (standard_conforming_strings) does not. */
const quoteSetting = (value: string): string => `'${value.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
const quoteLiteral = (value: string): string => `'${value.replace(/'/g, "''")}'`;

/** postgresql.auto.conf for a stopped node (what ALTER SYSTEM would have written). */
export function renderAutoConf(settings: Record<string, string>): string {
  const lines = Object.entries(settings).map(([key, value]) => `${key} = ${quoteSetting(value)}`);
  return `# Do not edit this file manually!\n# It will be overwritten by the ALTER SYSTEM command.\n${lines.join('\n')}\n`;
}

/** The same settings for a running node: ALTER SYSTEM statements, then a reload (none needs a restart). */
export function alterSystemStatements(settings: Record<string, string>): string[] {
  return [...Object.entries(settings).map(([key, value]) => `ALTER SYSTEM SET ${key} = ${quoteLiteral(value)}`), 'SELECT pg_reload_conf()'];
}

export interface ProxyTarget {
  host: string;
  port: number;
}

export const formatProxyTarget = (target: ProxyTarget): string => `${target.host}:${target.port}\n`;

/** The proxy's target file: one line `host:port`. */
export function parseProxyTarget(text: string, file = 'the proxy target file'): ProxyTarget {
  const match = /^([A-Za-z0-9.-]+):(\d{1,5})$/.exec(text.trim());
  const port = match ? Number(match[2]) : NaN;
  if (!match || port < 1 || port > 65_535) {
    throw new OutboxError('CONFIG_INVALID', `${file} must hold one line host:port (e.g. 127.0.0.1:55435); it holds ${JSON.stringify(text.trim().slice(0, 80))}. Switch the proxy with switchProxy() instead of editing it.`);
  }
  return { host: match[1] as string, port };
}
