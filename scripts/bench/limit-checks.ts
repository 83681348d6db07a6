#!/usr/bin/env node
/**
 * What the outbox's limit CHECK constraints cost per INSERT, side by side in one run (docs/bench.md):
 *
 *   bounded  aggregate_type and traceparent checked with bounded repetition ({1,236}, {32}), as db:provision
 *            made them before 2026-12-07;
 *   current  the constraints db:provision makes now (unbounded classes and length tests, the same answers);
 *   none     the same table with the five limit constraints dropped: what the rest of an INSERT costs.
 *
 * Three copies of a provisioned outbox (columns, defaults, identity, indexes) in a throw-away database.
 * Each round fills each copy, in rotated order, from empty: `--rows` rows in one INSERT … SELECT (the
 * database's CPU per row, as a bulk backfill or a busy primary pays it), then `--single` single-row
 * INSERTs, each its own transaction, with synchronous_commit off (a writer's transaction without the
 * disk's flush, which would hide the CPU it costs). The first round is warm-up and
 * not counted; medians over the rest. Point PGHOST/PGPORT/PGUSER at a server you may create a database on:
 *
 *   PGHOST=127.0.0.1 PGPORT=55441 PGUSER=postgres node build/scripts/bench/limit-checks.js [--rounds 6]
 */
import { performance } from 'node:perf_hooks';
import { Command, Option } from 'commander';
import type { OutboxOptions } from 'outbox-router/config';
import { qualified } from 'outbox-router/db';
import { AGGREGATE_TYPE_PATTERN, OUTBOX_LIMIT_CONSTRAINTS, TRACEPARENT_PATTERN } from 'outbox-router/producer';
import { wholeArg } from './args';
import { createBenchDatabase, throwawayRoles } from './bench-db';
import { say } from './capacity-db';
import { outboxChunkSql, uuidv7 } from './capacity-sql';
import { round } from './stats';

const VARIANTS = ['bounded', 'current', 'none'] as const;
type Variant = (typeof VARIANTS)[number];

interface Options {
  rows: number;
  single: number;
  rounds: number;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

async function main(options: Options): Promise<void> {
  const overrides: OutboxOptions = {
    database: { statementTimeoutMs: 3_600_000 },
    roles: throwawayRoles(),
  };
  const db = await createBenchDatabase(overrides, `limit_checks_${Date.now().toString(36)}`);
  try {
    const { schema, table } = db.config.outbox;
    const source = qualified(schema, table);
    const copy = (v: Variant) => qualified(schema, `limits_${v}`);
    const c = OUTBOX_LIMIT_CONSTRAINTS;
    for (const v of VARIANTS) {
      await db.pool.query(`CREATE TABLE ${copy(v)} (LIKE ${source} INCLUDING ALL)`);
      if (v === 'current') continue;
      const drop = v === 'none' ? Object.values(c) : [c.aggregateType, c.traceparent];
      for (const name of drop) await db.pool.query(`ALTER TABLE ${copy(v)} DROP CONSTRAINT ${name}`);
      if (v === 'bounded') {
        await db.pool.query(`ALTER TABLE ${copy(v)} ADD CONSTRAINT ${c.aggregateType} CHECK (aggregate_type ~ '${AGGREGATE_TYPE_PATTERN}')`);
        await db.pool.query(`ALTER TABLE ${copy(v)} ADD CONSTRAINT ${c.traceparent} CHECK (traceparent ~ '${TRACEPARENT_PATTERN}')`);
      }
    }
    const span = { startMs: Date.now() - 86_400_000, spanMs: 86_400_000, rows: options.rows, salt: 'limits' };
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const bulk: Record<Variant, number[]> = { bounded: [], current: [], none: [] };
    const single: Record<Variant, number[]> = { bounded: [], current: [], none: [] };
    for (let round = 0; round <= options.rounds; round++) {
      const order = VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length]!);
      for (const v of order) {
        await db.pool.query(`TRUNCATE ${copy(v)}`);
        let t = performance.now();
        await db.pool.query(outboxChunkSql(copy(v), span, 0, options.rows));
        const bulkUs = ((performance.now() - t) * 1000) / options.rows;
        const client = await db.pool.connect();
        try {
          // Without waiting for the commit's flush to disk: the CPU a transaction costs, which the checks change.
          await client.query('SET synchronous_commit = off');
          t = performance.now();
          for (let i = 0; i < options.single; i++) {
            await client.query(
              `INSERT INTO ${copy(v)} (id, aggregate_type, aggregate_id, event_type, payload, content_type, traceparent) VALUES ($1, 'Order', $2, 'OrderCreated', '\\x7b7d', 'application/json', $3)`,
              [uuidv7(Date.now()), `order-${i}`, traceparent],
            );
          }
        } finally {
          await client.query('RESET synchronous_commit').catch(() => undefined);
          client.release();
        }
        const singleUs = ((performance.now() - t) * 1000) / options.single;
        if (round > 0) {
          bulk[v].push(bulkUs);
          single[v].push(singleUs);
        }
        say(`${round === 0 ? 'warm-up' : `round ${round}/${options.rounds}`}: ${v}: ${bulkUs.toFixed(1)} µs a row in bulk, ${singleUs.toFixed(0)} µs a single-row transaction`);
      }
    }
    const m = (r: Record<Variant, number[]>) => Object.fromEntries(VARIANTS.map((v) => [v, median(r[v])])) as Record<Variant, number>;
    const b = m(bulk);
    const s = m(single);
    process.stdout.write(
      [
        `| checks | bulk INSERT, µs a row (median of ${options.rounds}) | the checks' share | single-row transaction, µs (synchronous_commit off) | transactions a second, one connection |`,
        '|---|---|---|---|---|',
        ...VARIANTS.map((v) => `| ${v} | ${round(b[v])} | ${v === 'none' ? '' : `${round(b[v] - b.none)} µs`} | ${round(s[v], 0)} | ${Math.round(1e6 / s[v]).toLocaleString('en')} |`),
        '',
        `bounded / current in bulk: ${round(b.bounded / b.current, 2)}; ${options.rows.toLocaleString('en')} rows a round, ${options.single.toLocaleString('en')} single-row transactions a round`,
        '',
      ].join('\n'),
    );
  } finally {
    await db.drop();
  }
}


new Command('limit-checks')
  .description("What the outbox's limit CHECK constraints cost per INSERT: bounded repetition against the current checks against none, side by side.")
  .addOption(new Option('--rows <n>', 'rows per bulk INSERT … SELECT').default(200_000).argParser(wholeArg('rows', 1_000)))
  .addOption(new Option('--single <n>', 'single-row transactions per round').default(2_000).argParser(wholeArg('single', 10)))
  .addOption(new Option('--rounds <n>', 'measured rounds, after one of warm-up').default(5).argParser(wholeArg('rounds', 1)))
  .action(async (opts: Options) => main(opts))
  .parseAsync()
  .catch((error: unknown) => {
    process.stderr.write(`limit-checks: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
