/**
 * outbox.cleanupMode = 'partition' (docs/operations.md, "Partitioned outbox"): db:provision turns the
 * outbox into a table range-partitioned on its UUIDv7 id, published through its root. Migration 015 has
 * the maintenance function and the argument for when a partition may be dropped.
 *
 * Only an empty outbox is converted, in provision's transaction: copying rows into the new table would
 * write them to the WAL again, and Debezium would publish them twice. The new table is made LIKE the old
 * one (columns, defaults, identity, CHECK constraints, indexes), takes its name and its index names, and
 * the grants, row policies and relay trigger are applied by the provision steps that follow.
 */
import { escapeIdentifier as quote, type Client } from 'pg';
import type { OutboxConfig } from '../config';
import { OutboxError } from '../errors';
import { outboxPartitionsFunctionName, sqlValues } from './sql-files';

export type PartitionedReport = 'not-partitioned' | 'converted' | 'partitioned';

export async function ensureOutboxPartitioned(client: Client, config: OutboxConfig): Promise<PartitionedReport> {
  const { outbox } = config;
  const v = sqlValues(config);
  const found = await client.query<{ relkind: string }>(
    'SELECT c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2',
    [outbox.schema, outbox.table],
  );
  const relkind = found.rows[0]?.relkind;
  if (relkind === 'p') {
    if (outbox.cleanupMode === 'partition') await makePartitions(client, config);
    return 'partitioned';
  }
  if (outbox.cleanupMode !== 'partition') return 'not-partitioned';
  if (relkind !== 'r') throw new OutboxError('PROVISION_FAILED', `${v.outbox} is not a table (relkind ${relkind ?? 'missing'}); the migrations create it.`);

  await client.query(`LOCK TABLE ${v.outbox} IN ACCESS EXCLUSIVE MODE`);
  const rows = await client.query<{ n: string }>(`SELECT count(*) AS n FROM (SELECT 1 FROM ${v.outbox} LIMIT 1000) r`);
  const n = Number(rows.rows[0]?.n ?? 0);
  if (n > 0) {
    throw new OutboxError(
      'PROVISION_FAILED',
      `outbox.cleanupMode is 'partition' but ${v.outbox} holds ${n >= 1000 ? 'at least 1000' : n} rows, and only an empty outbox is converted ` +
        '(copied rows would be published again). Let the DELETE cleanup empty it first (`outbox outbox:cleanup`, and `--below-floor` for older rows), ' +
        'or keep OUTBOX_CLEANUP_MODE=delete.',
    );
  }
  // The indexes by what they index (the text after USING), so the new table's get the old names back.
  const indexes = await client.query<{ name: string; def: string; constraint: boolean }>(
    `SELECT c.relname AS name, substring(pg_get_indexdef(i.indexrelid) from ' USING .*$') AS def,
            EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.conrelid = i.indrelid) AS "constraint"
       FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = $1::regclass`,
    [v.outbox],
  );
  const temp = `${outbox.table.slice(0, 40)}_partitioned`;
  const tempName = `${v.schema}.${quote(temp)}`;
  await client.query(`CREATE TABLE ${tempName} (LIKE ${v.outbox} INCLUDING ALL) PARTITION BY RANGE (id)`);
  await client.query(`DROP TABLE ${v.outbox}`);
  await client.query(`ALTER TABLE ${tempName} RENAME TO ${quote(outbox.table)}`);
  const fresh = await client.query<{ name: string; def: string }>(
    `SELECT c.relname AS name, substring(pg_get_indexdef(i.indexrelid) from ' USING .*$') AS def FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = $1::regclass`,
    [v.outbox],
  );
  for (const index of fresh.rows) {
    const old = indexes.rows.find((o) => o.def === index.def);
    if (!old || old.name === index.name) continue;
    await client.query(
      old.constraint ? `ALTER TABLE ${v.outbox} RENAME CONSTRAINT ${quote(index.name)} TO ${quote(old.name)}` : `ALTER INDEX ${v.schema}.${quote(index.name)} RENAME TO ${quote(old.name)}`,
    );
  }
  // Ids name their partition: only UUIDv7 (version nibble 7) may enter.
  await client.query(`ALTER TABLE ${v.outbox} ADD CONSTRAINT ${quote(`${outbox.table.slice(0, 50)}_id_uuidv7`)} CHECK (substr(id::text, 15, 1) = '7')`);
  await client.query(`ALTER PUBLICATION ${v.publication} ADD TABLE ${v.outbox}`);
  await client.query(`ALTER PUBLICATION ${v.publication} SET (publish_via_partition_root = true)`);
  await makePartitions(client, config);
  return 'converted';
}

/** The current window and the ones ahead, through migration 015's function (which also takes a cleanup mark). */
async function makePartitions(client: Client, config: OutboxConfig): Promise<void> {
  const fn = outboxPartitionsFunctionName(config.outbox);
  await client.query(`SELECT * FROM ${fn}($1, $2, $3, $4)`, [config.connector.slotName, config.outbox.partitionSeconds, config.outbox.partitionsAhead, 5000]);
}
