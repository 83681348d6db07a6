import type { Client } from 'pg';
import type { OutboxConfig } from '../config';
import { clientConfig, pgCode, withClient } from '../db';
import { OutboxError } from '../errors';
import { outboxCleanupRegistrations, outboxCleanupTables } from '../provision/sql-files';
import { quoteIdent } from './escape';
import { sleep } from '../retry';
import { checkPublication } from './publication-check';
import type { SlotInfo } from './slot-guard';
import { sampleSlots } from '../watchdog/slot-query';

/** The connector's PostgreSQL side, read and cleaned up with the admin settings (config.database). */

export function withAdmin<T>(config: OutboxConfig, body: (client: Client) => Promise<T>): Promise<T> {
  return withClient(clientConfig(config.database, { application_name: 'outbox-router connector' }), body);
}

export async function readSlot(client: Client, slotName: string): Promise<SlotInfo | undefined> {
  const row = (await sampleSlots(client)).slots.find((s) => s.slotName === slotName);
  if (!row) return undefined;
  return {
    slotName: row.slotName,
    database: row.database,
    plugin: row.plugin,
    active: row.active,
    activePid: row.activePid,
    restartLsn: row.restartLsn,
    confirmedFlushLsn: row.confirmedFlushLsn,
    walStatus: row.walStatus,
    failover: row.failover,
    retainedWalBytes: row.retainedBytes,
    confirmedLagBytes: row.flushLagBytes,
  };
}

/** What a deploy needs to know of the server before it builds the config. */
export interface ServerFacts {
  /** server_version_num, e.g. 170005: whether the server can make failover slots (17+). */
  versionNum: number;
  /**
   * The WAL timeline (1 on a server that was never promoted or restored to a point in time): a slot missing
   * under a stored offset on timeline > 1 is the loss of a failover without failover slots. null on a standby.
   */
  timeline: number | null;
}

/** One round trip; pg_walfile_name needs no privilege (pg_control_checkpoint would). */
export async function readServerFacts(client: Pick<Client, 'query'>): Promise<ServerFacts> {
  const { rows } = await client.query<{ version_num: number; timeline: number | null }>(
    `SELECT current_setting('server_version_num')::int AS version_num,
            CASE WHEN pg_is_in_recovery() THEN NULL
                 ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END AS timeline`,
  );
  return { versionNum: Number(rows[0]?.version_num), timeline: rows[0]?.timeline ?? null };
}

/**
 * What the connector needs and validation does not check: the publication (we run with
 * autocreate disabled) publishing inserts of the outbox table (publication-check.ts), and the
 * heartbeat table when heartbeats are on.
 */
export async function missingPrerequisites(client: Client, config: OutboxConfig, heartbeat: boolean): Promise<string[]> {
  const { schema, table, heartbeatTable, publication } = config.outbox;
  const missing: string[] = [];
  const check = await checkPublication(client, { publication, schema, table });
  missing.push(...check.problems);
  if (check.exists && heartbeat) {
    const hb = await checkPublication(client, { publication, schema, table: heartbeatTable });
    if (!hb.tablePublished) missing.push(`publication "${publication}" does not publish the heartbeat table ${quoteIdent(schema)}.${quoteIdent(heartbeatTable)}`);
  }
  if (heartbeat) {
    const hb = await client.query<{ oid: string | null }>('SELECT to_regclass($1) AS oid', [`${quoteIdent(schema)}.${quoteIdent(heartbeatTable)}`]);
    if (hb.rows[0]?.oid === null) missing.push(`heartbeat table ${quoteIdent(schema)}.${quoteIdent(heartbeatTable)} does not exist`);
  }
  return missing;
}

/**
 * Outbox rows nothing has published: `published_at IS NULL` (the relay's mark; CDC never sets it).
 * Used before the slot exists, when every row in the table was committed before the slot: with
 * snapshot.mode=no_data the connector starts at the end of WAL and never publishes them. Counting
 * every unpublished row is the sound rule without a slot (it may include rows an earlier connector
 * published, which the refusal says). A missing table counts 0: nothing to lose.
 */
export async function countUnpublishedRows(client: Client, config: OutboxConfig): Promise<number> {
  const { schema, table } = config.outbox;
  try {
    const { rows } = await client.query<{ n: string }>(`SELECT count(*)::bigint::text AS n FROM ${quoteIdent(schema)}.${quoteIdent(table)} WHERE published_at IS NULL`);
    return Number(rows[0]?.n ?? 0);
  } catch (error) {
    if (pgCode(error) === '42P01' || pgCode(error) === '3F000') return 0; // undefined_table / undefined_schema
    throw error;
  }
}

export function prerequisiteError(config: OutboxConfig, missing: string[]): OutboxError {
  return new OutboxError(
    'CONNECTOR_PREREQUISITE_MISSING',
    `The connector cannot stream from database ${config.database.database}: ${missing.join('; ')}. Run \`outbox db:provision\` ` +
      '(npm run db:provision) with the same configuration, then deploy again. Nothing was deployed.',
    { details: { missing } },
  );
}

/**
 * Waits until no walsender holds the slot (Connect stops tasks asynchronously), then drops it.
 * True if it was dropped, false if it did not exist.
 */
/**
 * Forgets the outbox cleanup's floor and marks of a dropped or replaced slot (migration 011), so the slot
 * it streams from next starts from a new floor; `unregister` also withdraws its registration (012), for a
 * slot no connector of ours uses any more. A database provisioned before 011 (012) has no such table.
 */
export async function forgetCleanupState(client: Pick<Client, 'query'>, outbox: { schema: string; table: string }, slotName: string, o: { unregister?: boolean } = {}): Promise<void> {
  const tables = [...Object.values(outboxCleanupTables(outbox)), ...(o.unregister ? [outboxCleanupRegistrations(outbox)] : [])];
  for (const name of tables) {
    const { rows } = await client.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [name]);
    if (rows[0]?.t) await client.query(`DELETE FROM ${name} WHERE slot_name = $1`, [slotName]);
  }
}

export async function dropSlot(client: Client, slotName: string, timeoutMs: number, pollMs = 250): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const slot = await readSlot(client, slotName);
    if (!slot) return false;
    if (!slot.active) {
      try {
        await client.query('SELECT pg_drop_replication_slot($1)', [slotName]);
        return true;
      } catch (error) {
        if (pgCode(error) === '42704') return false; // undefined_object: dropped meanwhile
        if (pgCode(error) !== '55006') throw error; // object_in_use: a walsender took it again
      }
    }
    if (Date.now() > deadline) {
      throw new OutboxError(
        'CONNECTOR_TIMEOUT',
        `Replication slot "${slotName}" is still in use by pid ${slot.activePid} after ${timeoutMs} ms, so it was not dropped. ` +
          'Find the process in pg_stat_replication (another connector?) and stop it, then run connector:delete --drop-slot again.',
        { retriable: true, details: { slotName, activePid: slot.activePid } },
      );
    }
    await sleep(pollMs);
  }
}

/** True if it was dropped, false if it did not exist. */
export async function dropPublication(client: Client, publication: string): Promise<boolean> {
  const { rowCount } = await client.query('SELECT 1 FROM pg_publication WHERE pubname = $1', [publication]);
  if (!rowCount) return false;
  await client.query(`DROP PUBLICATION IF EXISTS ${quoteIdent(publication)}`);
  return true;
}
