#!/usr/bin/env node
/**
 * The data-lifecycle run (`npm run test:lifecycle -- --minutes 60`): a steady CDC pipeline for as long as
 * asked, with every cleanup on short windows, sampled once a minute, to show that nothing grows:
 * - a writer commits `--rate` events/s (one per transaction) over rotating aggregates;
 * - now and then a key is broken: its handler fails until the run fixes it, so its first event is
 *   dead-lettered and the key parked with the events behind it; every `--replay-every` s the run fixes
 *   the broken keys older than a minute and runs `outbox dlq:replay`, which releases them;
 * - `outbox router` prunes its inbox (retention `--inbox-retention-s`, allowed below the topics' safe
 *   minimum on purpose: this run compresses months into an hour);
 * - `outbox watchdog` cleans the outbox (every `--cleanup-every` s).
 * Each sample: rows and bytes of the outbox, inbox and parked tables, the slot's unconfirmed WAL, and the
 * RSS of the router and watchdog. The verdict compares the last third of the run with the middle third.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Command } from 'commander';
import { action, loggerFor } from 'outbox-router/cli';
import { loadConfig, type OutboxConfig } from 'outbox-router/config';
import { deleteConnector, deployConnector } from 'outbox-router/connector';
import { clientConfig, createPool, withClient } from 'outbox-router/db';
import { provision } from 'outbox-router/provision';
import { sleep } from 'outbox-router/retry';
import { startCliProcess, type CliProcess } from '../bench/cli-process';
import { DIST } from '../bench/dist-paths';
import { describeTables, growthVerdicts, RSS_SLACK_MB, rssMb, sampleTables, TABLE_SLACK, type TableSample } from '../soak/sampling';
import { createStack } from '../stack/stack';
import { PROJECT_ROOT } from '../stack/paths';

const run = promisify(execFile);

const HANDLERS_JS = `module.exports = { order: { OrderPlaced: async (event, { tx }) => {
  const broken = await tx.query('SELECT 1 FROM lifecycle_broken WHERE aggregate_id = $1', [event.aggregateId]);
  if (broken.rowCount > 0) throw new Error('broken key ' + event.aggregateId);
  await tx.query('INSERT INTO lifecycle_effects (aggregate_id, n) VALUES ($1, 1) ON CONFLICT (aggregate_id) DO UPDATE SET n = lifecycle_effects.n + 1', [event.aggregateId]);
} } };\n`;

interface Sample extends TableSample {
  minute: number;
  routerRssMb: number;
  watchdogRssMb: number;
  written: number;
  handled: number;
}

async function main(opts: { minutes: number; rate: number; cleanupEvery: number; replayEvery: number; inboxRetentionS: number; keep: boolean }, log: ReturnType<typeof loggerFor>) {
  const say = (line: string) => process.stderr.write(`[lifecycle ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
  await createStack().up((e) => log.debug(e.detail));
  const name = `life${Date.now().toString(36)}`;
  const connector = { name: `outbox-${name}`, slotName: `${name}_slot`, topicPrefix: name, topicReplacement: `${name}.outbox.event.\${routedByValue}` };
  const base = loadConfig({ overrides: { connector } });
  await withClient(clientConfig(base.database, { database: 'postgres' }), (c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`));
  const settings = {
    database: { database: name },
    connector,
    router: { consumer: `${name}-router`, inboxRetentionMs: opts.inboxRetentionS * 1000, allowShortInboxRetention: true, inboxPruneIntervalMs: 15_000, maxAttempts: 2, backoff: { initialDelayMs: 50, maxDelayMs: 200 } },
    watchdog: { outboxCleanup: { intervalMs: opts.cleanupEvery * 1000 }, intervalMs: 15_000 },
  };
  const config: OutboxConfig = loadConfig({ overrides: settings as never });
  await provision(config);
  const pool = createPool(config.database, { max: 4 });
  await pool.query('CREATE TABLE lifecycle_broken (aggregate_id text PRIMARY KEY, broken_at timestamptz NOT NULL DEFAULT now())');
  await pool.query('CREATE TABLE lifecycle_effects (aggregate_id text PRIMARY KEY, n int NOT NULL)');
  await pool.query(`GRANT SELECT ON lifecycle_broken TO ${config.roles.router}; GRANT SELECT, INSERT, UPDATE ON lifecycle_effects TO ${config.roles.router}`);
  await deployConnector(config);
  const dir = mkdtempSync(join(tmpdir(), `${name}-`));
  const handlers = join(dir, 'handlers.js');
  writeFileSync(handlers, HANDLERS_JS);
  const configFile = join(dir, 'config.json');
  writeFileSync(configFile, JSON.stringify(settings));
  const processes: CliProcess[] = [];
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  const samples: Sample[] = [];
  let written = 0;
  try {
    const router = startCliProcess({ command: 'router', config, dir, log, args: ['--handlers', handlers] });
    const watchdog = startCliProcess({ command: 'watchdog', config, dir, log, args: [] });
    processes.push(router, watchdog);
    await router.healthy(120_000);
    say(`pipeline up: database ${name}; writing ${opts.rate} events/s for ${opts.minutes} min`);

    const t0 = Date.now();
    const end = t0 + opts.minutes * 60_000;
    // The writer: one event per transaction, paced by the clock; aggregates rotate through 500 ids.
    const writer = (async () => {
      let i = 0;
      while (Date.now() < end && !stop.signal.aborted) {
        const due = t0 + (i * 1000) / opts.rate;
        if (due > Date.now()) await sleep(due - Date.now());
        const key = `k${i % 500}`;
        await pool.query(
          `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type) VALUES (gen_random_uuid(), 'order', $1, 'OrderPlaced', convert_to($2, 'UTF8'), 'application/json')`,
          [key, JSON.stringify({ i, at: new Date().toISOString(), pad: 'x'.repeat(120) })],
        );
        i++;
        written = i;
      }
    })();
    // Breaks a key every 20 s; fixes the ones older than a minute and replays every replayEvery s.
    const breaker = (async () => {
      let b = 0;
      let lastReplay = Date.now();
      while (Date.now() < end && !stop.signal.aborted) {
        await sleep(20_000);
        await pool.query('INSERT INTO lifecycle_broken (aggregate_id) VALUES ($1) ON CONFLICT DO NOTHING', [`k${(b++ * 37) % 500}`]);
        if (Date.now() - lastReplay >= opts.replayEvery * 1000) {
          lastReplay = Date.now();
          await pool.query("DELETE FROM lifecycle_broken WHERE broken_at < now() - interval '60 seconds'");
          const r = await run(process.execPath, [DIST.cli, '--log-format', 'json', '--log-level', 'warn', 'dlq:replay', '--config', configFile, '--aggregate-type', 'order', '--consumer', settings.router.consumer, '--json'], {
            env: { ...process.env, PGDATABASE: name },
          }).catch((error: Error & { stdout?: string; stderr?: string }) => ({ stdout: error.stdout ?? '', stderr: `${error.message} ${error.stderr ?? ''}` }));
          say(`dlq:replay: ${(r.stdout || r.stderr).trim().slice(0, 200)}`);
        }
      }
    })();
    const sampler = (async () => {
      let minute = 0;
      while (Date.now() < end + 1 && !stop.signal.aborted) {
        await sleep(Math.max(0, t0 + (minute + 1) * 60_000 - Date.now()));
        minute++;
        const tables = await sampleTables(pool, connector.slotName);
        const handled = Number((await pool.query<{ n: string }>('SELECT coalesce(sum(n), 0)::bigint AS n FROM lifecycle_effects')).rows[0]?.n ?? 0);
        const s: Sample = { minute, ...tables, routerRssMb: rssMb(router.pid), watchdogRssMb: rssMb(watchdog.pid), written, handled };
        samples.push(s);
        say(`min ${String(minute).padStart(3)}: ${describeTables(s)}, RSS router ${s.routerRssMb} MB watchdog ${s.watchdogRssMb} MB, written ${s.written}, handled ${s.handled}`);
        for (const p of processes) if (p.exitCode() !== null) throw new Error(`a service exited: ${p.problems().slice(-3).join(' | ')}`);
        if (Date.now() >= end) break;
      }
    })();
    await Promise.all([writer, breaker, sampler]);
  } finally {
    for (const p of processes) await p.stop();
    await pool.end();
    if (!opts.keep) {
      await deleteConnector(config, { dropSlot: true, force: true }).catch(() => {});
      await withClient(clientConfig(base.database, { database: 'postgres' }), (c) => c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`)).catch(() => {});
    }
  }
  const verdicts = growthVerdicts(samples, [...TABLE_SLACK, ['routerRssMb', RSS_SLACK_MB], ['watchdogRssMb', RSS_SLACK_MB]]);
  const report = { date: new Date().toISOString(), minutes: opts.minutes, rate: opts.rate, cleanupEverySeconds: opts.cleanupEvery, inboxRetentionSeconds: opts.inboxRetentionS, written, samples, verdicts, ok: verdicts.every((v) => v.flat) };
  const reports = join(PROJECT_ROOT, 'reports');
  mkdirSync(reports, { recursive: true });
  const file = join(reports, `lifecycle-${Date.now()}.json`);
  writeFileSync(file, JSON.stringify(report, null, 2));
  for (const v of verdicts) say(`${v.key}: middle third ${v.middle}, last third ${v.last} → ${v.flat ? 'flat' : 'GROWING'}`);
  say(`${report.ok ? 'PASSED' : 'FAILED'}; report ${file}`);
  return report.ok ? 0 : 1;
}

const program = new Command('test:lifecycle')
  .description('A steady CDC pipeline with the outbox cleanup, inbox pruning and DLQ replay on short windows, sampled each minute: tables, slot lag and RSS must stay flat.')
  .option('--minutes <n>', 'how long to write', (v) => Number(v), 60)
  .option('--rate <n>', 'events per second', (v) => Number(v), 100)
  .option('--cleanup-every <s>', "the watchdog's outbox cleanup interval", (v) => Number(v), 10)
  .option('--replay-every <s>', 'fix broken keys and run dlq:replay this often', (v) => Number(v), 120)
  .option('--inbox-retention-s <s>', "the router's inbox retention", (v) => Number(v), 300)
  .option('--keep', 'keep the database and connector afterwards', false)
  .option('--log-format <format>', 'json or pretty', 'pretty')
  .option('--log-level <level>', 'log level', 'warn')
  .action(
    action(async (opts: { minutes: number; rate: number; cleanupEvery: number; replayEvery: number; inboxRetentionS: number; keep: boolean }, command: Command) => main(opts, loggerFor(command))),
  );
void program.parseAsync(process.argv);
