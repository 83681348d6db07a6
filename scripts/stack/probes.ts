import axios from 'axios';
import { Kafka, logLevel, type Admin } from 'kafkajs';
import { adminClient } from './postgres';
import { DEBEZIUM_PLUGIN_CLASSES, POSTGRES, STACK_HOST, stackUrls } from './settings';

/** A probe resolves with a short fact when the service is ready, or rejects with why it is not. */
export type Probe = () => Promise<string>;

/** Ready = accepts queries with wal_level=logical; `database` lets `up` probe before `app` exists. */
export const probePostgres = async (database: string = POSTGRES.database): Promise<string> => {
  const client = adminClient(database);
  await client.connect();
  try {
    const { rows } = await client.query<{ wal_level: string; version: string }>(
      "SELECT current_setting('wal_level') AS wal_level, current_setting('server_version') AS version",
    );
    const row = rows[0];
    if (row?.wal_level !== POSTGRES.walLevel) throw new Error(`wal_level is ${row?.wal_level}, expected ${POSTGRES.walLevel}`);
    return `PostgreSQL ${row.version}, wal_level=${row.wal_level}`;
  } finally {
    await client.end().catch(() => {});
  }
};

export const probeKafka: Probe = async () =>
  withAdmin(stackUrls.kafkaBrokers, async (admin) => {
    const cluster = await admin.describeCluster();
    if (cluster.brokers.length === 0) throw new Error('metadata lists no broker');
    return `cluster ${cluster.clusterId}, ${cluster.brokers.length} broker(s), controller ${cluster.controller}`;
  });

/**
 * A cluster-profile broker is ready when it answers on its own port with metadata that lists all
 * `expected` brokers, itself among them, and a controller. A broker is listed only once the active
 * controller has unfenced it, so this also says the KRaft quorum has a leader.
 */
export function kafkaNodeProbe(node: { nodeId: number; port: number }, expected: number): Probe {
  return () =>
    withAdmin([`${STACK_HOST}:${node.port}`], async (admin) => {
      const cluster = await admin.describeCluster();
      const ids = cluster.brokers.map((b) => b.nodeId).sort((a, b) => a - b);
      const listed = `${ids.length} of ${expected} brokers in metadata (${ids.join(', ') || 'none'})`;
      if (ids.length < expected || !ids.includes(node.nodeId)) throw new Error(listed);
      if (cluster.controller === null || cluster.controller < 0) throw new Error(`${listed}, no controller`);
      return `node ${node.nodeId}: ${listed}, controller ${cluster.controller}`;
    });
}

async function withAdmin<T>(brokers: string[], use: (admin: Admin) => Promise<T>): Promise<T> {
  const kafka = new Kafka({ clientId: 'outbox-stack-probe', brokers, logLevel: logLevel.NOTHING, connectionTimeout: 1_000, retry: { retries: 0 } });
  const admin = kafka.admin();
  await admin.connect();
  try {
    return await use(admin);
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

/** Ready = the worker at `url` lists the Debezium classes (each worker loads its own plugin path). */
export function connectProbe(url: string): Probe {
  return async () => {
    const { data } = await axios.get<Array<{ class: string; version?: string }>>(`${url}/connector-plugins`, {
      params: { connectorsOnly: false },
      timeout: 3_000,
    });
    const listed = new Set(data.map((p) => p.class));
    const missing = DEBEZIUM_PLUGIN_CLASSES.filter((c) => !listed.has(c));
    if (missing.length > 0) throw new Error(`Connect answers but does not list ${missing.join(', ')}`);
    const pg = data.find((p) => p.class === DEBEZIUM_PLUGIN_CLASSES[0]);
    return `${data.length} plugins, PostgresConnector ${pg?.version ?? '?'}`;
  };
}

export const probeConnect: Probe = connectProbe(stackUrls.connect);

export const probeRegistry: Probe = async () => {
  const { data } = await axios.get<unknown>(`${stackUrls.registry}/subjects`, { timeout: 3_000 });
  if (!Array.isArray(data)) throw new Error(`GET /subjects answered ${JSON.stringify(data).slice(0, 80)}, not a list`);
  return `${data.length} subject(s)`;
};

export function describeFailure(error: unknown): string {
  if (axios.isAxiosError(error)) {
    return error.response ? `HTTP ${error.response.status}` : (error.code ?? error.message);
  }
  const err = error as NodeJS.ErrnoException;
  return err?.code && !String(err.message).includes(err.code) ? `${err.code}: ${err.message}` : String(err?.message ?? error);
}
