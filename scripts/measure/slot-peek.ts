#!/usr/bin/env node
/**
 * On demand, not in CI: how long `outbox:switch-to-relay` and the `connector:delete --drop-slot` guard
 * take when the slot holds a large backlog (`node build/scripts/measure/slot-peek.js --wal-gb 2`). Both
 * peek the slot, which decodes every WAL record from restart_lsn, published or not: the WAL is made
 * with large inserts into a table outside the publication, plus `--rows` outbox rows. Runs in a
 * database of its own on the local stack, with no connector (the slot is made by hand), and drops the
 * slot and the database at the end. Needs ~wal-gb of free disk while it runs.
 */
import { randomBytes } from 'node:crypto';
import { Command } from 'commander';
import { loadConfig } from 'outbox-router/config';
import { deleteConnector, switchToRelay } from 'outbox-router/connector';
import { clientConfig, withClient } from 'outbox-router/db';
import { createLogger } from 'outbox-router/log';
import { provision } from 'outbox-router/provision';

async function main(walGb: number, rows: number): Promise<void> {
  const base = loadConfig();
  const name = `peekmeasure_${randomBytes(4).toString('hex')}`;
  const admin = clientConfig(base.database, { database: 'postgres' });
  await withClient(admin, (c) => c.query(`CREATE DATABASE ${name}`));
  // Roles of its own, so provisioning does not touch the shared stack's roles.
  const roles = { cdc: `${name}_cdc`, app: `${name}_app`, monitor: `${name}_mon`, router: `${name}_rt`, relay: `${name}_rl` };
  const config = loadConfig({ overrides: { database: { database: name }, roles, connector: { name, slotName: name } } });
  const log = createLogger({ level: 'info' });
  const timed = async <T>(what: string, body: () => Promise<T>): Promise<T> => {
    const started = Date.now();
    const result = await body().catch((error: unknown) => error as T);
    process.stdout.write(`${what}: ${((Date.now() - started) / 1000).toFixed(1)} s: ${JSON.stringify(result, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)).slice(0, 400)}\n`);
    return result;
  };
  try {
    await provision(config);
    await withClient(clientConfig(config.database, { statement_timeout: 0 }), async (db) => {
      await db.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [name]);
      await db.query('CREATE TABLE filler (b text)'); // not in the publication: decoded, never sent
      await db.query(
        `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type)
         SELECT gen_random_uuid(), 'order', 'o-' || (g % 1000), 'OrderPlaced', convert_to('{"n":' || g || '}', 'UTF8'), 'application/json' FROM generate_series(1, $1::int) g`,
        [rows],
      );
      const target = walGb * 1024 ** 3;
      for (;;) {
        const { rows: r } = await db.query<{ n: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint::text AS n FROM pg_replication_slots WHERE slot_name = $1', [name]);
        const pending = Number(r[0]!.n);
        process.stdout.write(`pending WAL ${(pending / 1024 ** 3).toFixed(2)} GiB\n`);
        if (pending >= target) break;
        // ~200 MiB of WAL per statement: 100,000 rows of 2 KiB of incompressible-ish text.
        await db.query("INSERT INTO filler SELECT string_agg(md5(g::text || random()::text), '') FROM generate_series(1, 64) g, generate_series(1, 100000) r GROUP BY r");
      }
    });
    const quiet = createLogger({ level: 'info' });
    await timed('switch-to-relay --dry-run (peek + count)', () => switchToRelay(config, { dryRun: true, log: quiet }));
    await timed('connector:delete --drop-slot guard (peek + count; refuses: nothing published)', () => deleteConnector(config, { dropSlot: true, log: quiet }));
    await timed('switch-to-relay (peek + mark)', () => switchToRelay(config, { log: quiet }));
    await withClient(clientConfig(config.database), (db) => db.query('UPDATE outbox SET published_at = now() WHERE published_at IS NULL')); // the relay publishing
    await timed('connector:delete --drop-slot after the relay published (peek + count; drops)', () => deleteConnector(config, { dropSlot: true, log: quiet }));
  } finally {
    await withClient(admin, async (c) => {
      await c.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1', [name]).catch(() => {});
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      for (const role of Object.values(roles)) await c.query(`DROP ROLE IF EXISTS ${role}`).catch(() => {});
    });
    log.info({ database: name }, 'slot and database dropped');
  }
}

new Command('measure-slot-peek')
  .option('--wal-gb <n>', 'pending WAL to make, GiB', '2')
  .option('--rows <n>', 'outbox rows in the backlog', '100000')
  .action(async (opts: { walGb: string; rows: string }) => main(Number(opts.walGb), Number(opts.rows)))
  .parseAsync()
  .catch((error: unknown) => {
    process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
    process.exitCode = 1;
  });
