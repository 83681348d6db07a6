#!/usr/bin/env node
/**
 * The capacity model, measured (docs/capacity.md): the inbox and the CDC outbox at 100 million rows.
 *
 *   inbox-plain        the inbox as one table: the router's INSERT, then the DELETE prune of the oldest day;
 *   inbox-partitioned  the inbox partitioned by day: the router's INSERT, then the drop of the oldest day;
 *   outbox-delete      the outbox cleanup's DELETE behind the slot, run by run, and the VACUUM after it;
 *   outbox-partition   the partitioned outbox's cleanup, a confirmed hourly partition dropped per call.
 *
 * Each part has its own throw-away database, provisioned by the toolkit (bench-db.ts), filled in the
 * database by INSERT … SELECT generate_series (capacity-sql.ts), measured (capacity-inbox.ts,
 * capacity-outbox.ts) and dropped before the next part starts (also on Ctrl-C), so the disk holds one
 * part at a time. Wall time, WAL bytes (pg_current_wal_lsn before and after) and the longest wait of a
 * probe writer beside each prune and cleanup. Progress on stderr, tables on stdout, every figure in the
 * JSON file. Point PGHOST/PGPORT/PGUSER at a cluster of your own with wal_level=logical (not the shared
 * local stack: a full run writes hundreds of GB of WAL); `npm run build`, then:
 *
 *   PGHOST=127.0.0.1 PGPORT=55441 PGUSER=postgres node build/scripts/bench/capacity.js [--rows 1000000]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname } from 'node:path';
import { Command, Option } from 'commander';
import type { OutboxOptions } from 'outbox-router/config';
import { loadConfig } from 'outbox-router/config';
import { clientConfig, withClient } from 'outbox-router/db';
import { wholeArg } from './args';
import { throwawayRoles } from './bench-db';
import { say } from './capacity-db';
import { DAY_MS, runInbox, type InboxResult } from './capacity-inbox';
import { runOutbox, type OutboxResult } from './capacity-outbox';
import { printReport } from './capacity-report';

const PARTS = ['inbox-plain', 'inbox-partitioned', 'outbox-delete', 'outbox-partition'] as const;
type Part = (typeof PARTS)[number];

interface Options {
  rows: number;
  days: number;
  chunkRows: number;
  workers: number;
  insertEvents: number;
  runs: number;
  parts: Part[];
  out: string;
}

const SETTINGS = ['server_version', 'shared_buffers', 'max_wal_size', 'checkpoint_timeout', 'wal_level', 'wal_compression', 'full_page_writes', 'synchronous_commit', 'autovacuum', 'maintenance_work_mem', 'work_mem'];

async function main(options: Options): Promise<void> {
  // Throw-away roles on a throw-away cluster: passwords of this run only, never printed.
  const overrides: OutboxOptions = {
    // A chunk of a million rows, a day's DELETE run or a VACUUM of 40 GB outlasts the default 30 s.
    database: { statementTimeoutMs: 24 * 3_600_000 },
    roles: throwawayRoles(),
  };
  const base = loadConfig({ overrides });
  const server = await withClient(clientConfig(base.database, { database: 'postgres' }), async (c) => {
    const out: Record<string, string> = {};
    for (const name of SETTINGS) out[name] = (await c.query<{ v: string }>(`SELECT current_setting('${name}') AS v`)).rows[0]!.v;
    return out;
  });
  if (server.wal_level !== 'logical') throw new Error(`wal_level is ${server.wal_level} on ${base.database.host}:${base.database.port}: the outbox parts need a logical slot; set wal_level = logical and restart it`);
  const nowMs = Date.now();
  const todayMs = nowMs - (nowMs % DAY_MS);
  const startMs = todayMs - options.days * DAY_MS;
  const drops = new Set<() => Promise<void>>();
  const track = (drop: () => Promise<void>) => void drops.add(drop);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      say(`${signal}: dropping the bench databases`);
      void Promise.allSettled([...drops].map((d) => d())).then(() => process.exit(130));
    });
  }
  const loads: number[][] = [];
  const sampler = setInterval(() => loads.push(loadavg()), 30_000);
  const startedAt = new Date().toISOString();
  say(`PostgreSQL ${server.server_version} at ${base.database.host}:${base.database.port}; ${options.rows.toLocaleString('en')} rows per part over ${options.days} days + today; parts ${options.parts.join(', ')}`);
  const inbox: InboxResult[] = [];
  const outbox: OutboxResult[] = [];
  const common = { rows: options.rows, chunkRows: options.chunkRows, workers: options.workers, startMs, nowMs, overrides };
  const results = () => ({
    startedAt,
    endedAt: new Date().toISOString(),
    options,
    machine: { cpus: cpus().length, memoryBytes: totalmem(), loadAverage: summariseLoad(loads) },
    server,
    data: { startMs, nowMs, from: new Date(startMs).toISOString(), to: new Date(nowMs).toISOString() },
    inbox,
    outbox,
  });
  try {
    for (const part of options.parts) {
      loads.push(loadavg());
      if (part === 'inbox-plain' || part === 'inbox-partitioned') {
        inbox.push(await runInbox(part === 'inbox-plain' ? 'plain' : 'partitioned', { ...common, insertEvents: options.insertEvents }, track));
      } else {
        outbox.push(await runOutbox(part === 'outbox-delete' ? 'delete' : 'partition', { ...common, runs: options.runs }, track));
      }
      // After each part: a crash later keeps what was measured.
      mkdirSync(dirname(options.out), { recursive: true });
      writeFileSync(options.out, `${JSON.stringify(results(), null, 2)}\n`);
    }
  } finally {
    clearInterval(sampler);
  }
  const final = results();
  writeFileSync(options.out, `${JSON.stringify(final, null, 2)}\n`);
  printReport(final);
  say(`results in ${options.out}`);
}

function summariseLoad(samples: number[][]): { samples: number; min1: number; max1: number; mean1: number } {
  const ones = samples.map((s) => s[0] ?? 0);
  return { samples: ones.length, min1: Math.min(...ones), max1: Math.max(...ones), mean1: ones.reduce((a, b) => a + b, 0) / Math.max(1, ones.length) };
}


const program = new Command('capacity')
  .description('The inbox and the CDC outbox at 100 million rows: the router INSERT, the DELETE prune against the partition drop, the outbox cleanup run (time, WAL, lock waits).')
  .addOption(new Option('--rows <n>', 'rows per part (inbox, outbox); 1000000 for a quick check').default(100_000_000).argParser(wholeArg('rows', 10_000)))
  .addOption(new Option('--days <n>', 'the rows spread evenly over this many whole days before today, and today so far').default(7).argParser(wholeArg('days', 2)))
  .addOption(new Option('--chunk-rows <n>', 'rows per INSERT … SELECT (one transaction each)').default(1_000_000).argParser(wholeArg('chunk-rows', 1_000)))
  .addOption(new Option('--workers <n>', 'connections loading chunks at once').default(2).argParser(wholeArg('workers', 1)))
  .addOption(new Option('--insert-events <n>', "events the router's INSERT writes in transactions of 100 (a tenth of it one per transaction)").default(20_000).argParser(wholeArg('insert-events', 100)))
  .addOption(new Option('--runs <n>', 'outbox cleanup runs measured per mode').default(3).argParser(wholeArg('runs', 1)))
  .addOption(
    new Option('--parts <list>', `comma list of ${PARTS.join(', ')}`).default([...PARTS]).argParser((value: string) => {
      const parts = value.split(',').map((p) => p.trim());
      const bad = parts.find((p) => !(PARTS as readonly string[]).includes(p));
      if (bad) throw new Error(`--parts: unknown part "${bad}"; use a comma list of ${PARTS.join(', ')}`);
      return parts as Part[];
    }),
  )
  .option('--out <file>', 'where the JSON results go', 'bench/capacity.json')
  .action(async (opts: Options) => main(opts));

program.parseAsync().catch((error: unknown) => {
  process.stderr.write(`capacity: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
