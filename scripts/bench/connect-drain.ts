#!/usr/bin/env node
/**
 * Events per second of one Connect task (docs/capacity.md): Debezium's PostgreSQL connector runs one task
 * per replication slot, so this is the ceiling of one outbox. On the local stack, in a throw-away database
 * with its own connector, slot and topics:
 *
 * 1. connector:deploy's code path (deployConnector), one probe event through to its routed topic;
 * 2. the connector paused (connector:pause), `--events` outbox rows written meanwhile (INSERT … SELECT,
 *    capacity-sql.ts outboxChunkSql, 50,000 per transaction: the slot holds them);
 * 3. resumed; the routed topic's end offsets read every 100 ms until they hold every row.
 *
 * events/s = rows / (last offset reached − first new offset seen): the drain itself, without the
 * task's restart after resume (reported beside it). Connector, slot, topics and database are removed at
 * the end. Needs `npm run build` and the local stack (`npm run stack:up`); hold the stack's lock:
 *
 *   flock /work/coord/stack.lock node build/scripts/bench/connect-drain.js [--events 200000]
 */
import { cpus, loadavg } from 'node:os';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Command, Option } from 'commander';
import { loadConfig, type OutboxConfig } from 'outbox-router/config';
import { createConnectClient, deleteConnector, deployConnector, pauseConnector, resumeConnector } from 'outbox-router/connector';
import { clientConfig, createPool, qualified, withClient } from 'outbox-router/db';
import { createKafka } from 'outbox-router/kafka';
import { provision } from 'outbox-router/provision';
import { say } from './capacity-db';
import { chunks, outboxChunkSql } from './capacity-sql';

async function endOffset(admin: ReturnType<ReturnType<typeof createKafka>['admin']>, topic: string): Promise<number> {
  const offsets = await admin.fetchTopicOffsets(topic).catch(() => []);
  return offsets.reduce((n, o) => n + Number(o.high), 0);
}

async function waitState(config: OutboxConfig, state: 'RUNNING' | 'PAUSED', timeoutMs = 120_000): Promise<void> {
  const client = createConnectClient(config.connect);
  const until = Date.now() + timeoutMs;
  for (;;) {
    const s = await client.status(config.connector.name).catch(() => undefined);
    if (s && s.connector.state === state && s.tasks.length > 0 && s.tasks.every((t) => t.state === state)) return;
    if (Date.now() > until) throw new Error(`connector ${config.connector.name} not ${state} after ${timeoutMs} ms: ${JSON.stringify(s)}`);
    await sleep(250);
  }
}

async function main(opts: { events: number; out: string }): Promise<void> {
  const name = `capdrain${Date.now().toString(36)}`;
  const connector = { name: `outbox-${name}`, slotName: `${name}_slot`, topicPrefix: name, topicReplacement: `${name}.outbox.event.\${routedByValue}` };
  const base = loadConfig({ overrides: { connector } });
  await withClient(clientConfig(base.database, { database: 'postgres' }), (c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`));
  const config = loadConfig({ overrides: { connector, database: { database: name } } });
  const pool = createPool(config.database, { max: 2 });
  const kafka = createKafka(config, { role: 'capacity-drain' });
  const admin = kafka.admin();
  await admin.connect();
  const topic = `${name}.outbox.event.Order`;
  const outbox = qualified(config.outbox.schema, config.outbox.table);
  const write = async (rows: number) => {
    const now = Date.now();
    const span = { startMs: now - 60_000, spanMs: 60_000, rows, salt: `${name}${now}` };
    for (const [lo, hi] of chunks(rows, 50_000)) await pool.query(outboxChunkSql(outbox, span, lo, hi));
  };
  try {
    await provision(config);
    say(`connect drain: deploying ${config.connector.name}`);
    const deployed = await deployConnector(config);
    await write(1);
    const probeUntil = Date.now() + 120_000;
    while ((await endOffset(admin, topic)) < 1) {
      if (Date.now() > probeUntil) throw new Error(`the probe event did not reach ${topic} within 120 s`);
      await sleep(250);
    }
    await pauseConnector(config);
    await waitState(config, 'PAUSED');
    say(`connect drain: paused; writing ${opts.events.toLocaleString('en')} outbox rows`);
    const w = Date.now();
    await write(opts.events);
    const writeMs = Date.now() - w;
    const before = await endOffset(admin, topic);
    const partitions = (await admin.fetchTopicOffsets(topic)).length;
    const load1 = loadavg()[0];
    say(`connect drain: resuming (topic ${topic}: ${partitions} partitions, ${before} records)`);
    const resumed = Date.now();
    await resumeConnector(config);
    let first = 0;
    let reached = 0;
    const target = before + opts.events;
    const deadline = resumed + 600_000;
    for (;;) {
      const n = await endOffset(admin, topic);
      if (!first && n > before) first = Date.now();
      if (n >= target) {
        reached = Date.now();
        break;
      }
      if (Date.now() > deadline) throw new Error(`${topic} holds ${n - before} of ${opts.events} rows after 600 s`);
      await sleep(100);
    }
    const drainMs = reached - first;
    const result = {
      at: new Date().toISOString(),
      events: opts.events,
      topicPartitions: partitions,
      writeMs,
      resumeToFirstMs: first - resumed,
      drainMs,
      eventsPerSecond: opts.events / (drainMs / 1000),
      eventsPerSecondFromResume: opts.events / ((reached - resumed) / 1000),
      connector: Object.fromEntries(Object.entries(deployed.config).filter(([k]) => /batch|queue|poll|tasks\.max|plugin|snapshot|heartbeat/.test(k))),
      machine: { cpus: cpus().length, loadAverageAtResume: load1, loadAverageAtEnd: loadavg()[0] },
    };
    mkdirSync(dirname(opts.out), { recursive: true });
    writeFileSync(opts.out, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(
      `one Connect task drained ${opts.events.toLocaleString('en')} events in ${(drainMs / 1000).toFixed(1)} s: ${Math.round(result.eventsPerSecond).toLocaleString('en')} events/s ` +
        `(${Math.round(result.eventsPerSecondFromResume).toLocaleString('en')} counting the ${result.resumeToFirstMs} ms from resume to the first record); load average ${load1?.toFixed(1)} → ${result.machine.loadAverageAtEnd?.toFixed(1)}\n`,
    );
  } finally {
    say('connect drain: removing the connector, its slot, topics and database');
    await deleteConnector(config, { dropSlot: true, force: true }).catch((e: Error) => say(`connector delete: ${e.message}`));
    const mine = (await admin.listTopics().catch(() => [] as string[])).filter((t) => t.startsWith(`${name}.`) || t.startsWith(`${name}_`) || t === name);
    if (mine.length) await admin.deleteTopics({ topics: mine }).catch((e: Error) => say(`topic delete: ${e.message}`));
    await admin.disconnect().catch(() => {});
    await pool.end().catch(() => {});
    await withClient(clientConfig(base.database, { database: 'postgres' }), async (c) => {
      await c.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active', [connector.slotName]);
      await c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`);
    }).catch((e: Error) => say(`database drop: ${e.message}`));
  }
}

const program = new Command('connect-drain')
  .description('Events per second one Debezium task (one slot) drains from a backlog, on the local stack.')
  .addOption(
    new Option('--events <n>', 'outbox rows written while the connector is paused').default(200_000).argParser((v: string) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1000) throw new Error(`--events must be a whole number of at least 1000, got ${v}`);
      return n;
    }),
  )
  .option('--out <file>', 'where the JSON result goes', 'bench/connect-drain.json')
  .action(async (opts: { events: number; out: string }) => main(opts));

program.parseAsync().catch((error: unknown) => {
  process.stderr.write(`connect-drain: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
