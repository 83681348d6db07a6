import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pool } from 'pg';
import { createCodec, registerSchemas, topicForReplacement } from 'outbox-router/codec';
import { loadConfig, type OutboxConfig, type OutboxOptions } from 'outbox-router/config';
import { deleteConnector, deployConnector } from 'outbox-router/connector';
import { clientConfig, createPool, withClient } from 'outbox-router/db';
import { createKafka } from 'outbox-router/kafka';
import type { Logger } from 'outbox-router/log';
import { createOutboxWriter } from 'outbox-router/producer';
import { provision } from 'outbox-router/provision';
import { sleep } from 'outbox-router/retry';
import { createConnectorSupervisor, type ConnectorSupervisor } from 'outbox-router/watchdog';
import { round } from '../bench/stats';
import { createStack, type Stack } from '../stack/stack';
import { PROJECT_ROOT } from '../stack/paths';
import { commitToHandled, countHandled, measureRecovery, scanTopic, settledSlotLag, verify } from './checks';
import { newWriteState, writeEvents, type WriteState } from './writers';
import type { ChaosOptions, ChaosProfile, ChaosReport, FaultKind, FaultRecord, Pipeline } from './types';

export const PROFILES: Record<'full' | 'ci', ChaosProfile> = {
  full: { events: 20_000, aggregates: 200, writers: 4, rate: 250, rollbackShare: 0.1 },
  ci: { events: 6_000, aggregates: 200, writers: 4, rate: 200, rollbackShare: 0.1 },
};

/** The issue's plan: Connect (or the relay) killed twice, Kafka and PostgreSQL restarted once, the router killed three times. */
export function faultPlan(pipeline: Pipeline): Array<{ at: number; kind: FaultKind }> {
  const killCdc: FaultKind = pipeline === 'cdc' ? 'kill-connect' : 'kill-relay';
  return [
    { at: 0.1, kind: 'kill-router' },
    { at: 0.2, kind: killCdc },
    { at: 0.35, kind: 'restart-kafka' },
    { at: 0.5, kind: 'kill-router' },
    { at: 0.6, kind: 'restart-postgres' },
    { at: 0.75, kind: killCdc },
    { at: 0.85, kind: 'kill-router' },
  ];
}

const HANDLERS_JS = `module.exports = { order: { OrderCreated: async (event, { tx }) => {
  await tx.query('INSERT INTO chaos_effects (event_id, aggregate_id, seq) VALUES ($1, $2, $3)', [event.id, event.aggregateId, Number(event.headers.seq)]);
} } };\n`;

/**
 * One chaos run: concurrent writers (some transactions rolled back on purpose) push events through
 * CDC (Debezium) or the polling relay to a router process, while faults are injected on the real
 * stack. Afterwards the database and the topic are checked: every committed event applied exactly
 * once, nothing from a rolled-back transaction anywhere, per-aggregate order intact at the handler.
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const { pipeline, profile, log } = options;
  const say = (line: string) => (options.progress ? options.progress(line) : log.info(line));
  const t0 = Date.now();
  const stack = createStack();
  await stack.up((e) => log.debug(e.detail));
  const run = `chaos${pipeline}${Date.now().toString(36)}`;
  const topicReplacement = `${run}.outbox.event.\${routedByValue}`;
  const overrides: OutboxOptions = {
    database: { database: run },
    connector: {
      name: `outbox-${run}`,
      slotName: `${run}_slot`,
      topicPrefix: run,
      topicReplacement,
      ...(pipeline === 'cdc' && options.exactlyOnce ? { exactlyOnce: true } : {}),
    },
  };
  const base = loadConfig({ overrides: { connector: overrides.connector } });
  await withClient(clientConfig(base.database, { database: 'postgres' }), (c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(run)}`));
  const config = loadConfig({ overrides });
  const dir = mkdtempSync(join(tmpdir(), `${run}-`));
  const configFile = join(dir, 'config.json');
  writeFileSync(configFile, JSON.stringify({ database: { database: run }, connector: overrides.connector, relay: {} }));
  const handlersFile = join(dir, 'handlers.js');
  writeFileSync(handlersFile, HANDLERS_JS);
  const topic = topicForReplacement(topicReplacement)('order');
  const restarts: string[] = [];
  let supervisor: ConnectorSupervisor | undefined;
  const logDir = options.logDir ?? join(PROJECT_ROOT, 'reports');
  mkdirSync(logDir, { recursive: true });
  const children = new Set<ChildProcess>();
  let pool: Pool | undefined;
  try {
    await provision(config);
    pool = createPool(config.database, { max: profile.writers + 4, application_name: 'outbox-chaos' });
    pool.on('error', () => {});
    await prepareTablesAndTopic(pool, config, topic, log);
    if (pipeline === 'cdc') supervisor = await deployAndSupervise(config, log, say, restarts);

    const spawnPart = (part: 'router' | 'relay') => spawnCliPart(part, { run, configFile, handlersFile, logDir, config, children });
    const parts = { router: spawnPart('router'), relay: pipeline === 'relay' ? spawnPart('relay') : undefined };

    const codec = createCodec({ registry: config.registry, topicFor: topicForReplacement(topicReplacement) });
    const writer = createOutboxWriter({ outbox: config.outbox, codec });
    const state = newWriteState(profile);
    const writing = writeEvents(pool, writer, profile, state);
    writing.catch(() => {});

    const faults = await injectFaults(options, pool, state, { stack, log, say, parts, spawnPart });
    while (state.attempted < profile.events) await sleep(100);
    state.stopWriting = true;
    await writing;
    say(`writes done: ${state.committed.size} committed, ${state.rolledBack.size} rolled back, ${state.ambiguous} ambiguous commits resolved`);

    await drain(pool, state, say);
    await sleep(2_000); // a late duplicate would show up in the checks below
    return await buildReport(options, pool, config, topic, state, { faults, restarts, t0 });
  } finally {
    await supervisor?.stop();
    for (const child of children) child.kill('SIGKILL');
    await pool?.end().catch(() => {});
    await cleanUpRun(pipeline, config, base, run, log);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The tables the handler and the writers use, the schemas, and the routed topic (3 partitions). */
async function prepareTablesAndTopic(pool: Pool, config: OutboxConfig, topic: string, log: Logger): Promise<void> {
  await pool.query('CREATE TABLE chaos_business (aggregate_id text NOT NULL, seq int NOT NULL)');
  await pool.query('CREATE TABLE chaos_effects (n bigserial PRIMARY KEY, event_id uuid NOT NULL, aggregate_id text NOT NULL, seq int NOT NULL, handled_at timestamptz NOT NULL DEFAULT clock_timestamp())');
  await registerSchemas(config, { log });
  const admin = createKafka(config, { role: 'chaos' }).admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true });
  await admin.disconnect();
}

async function deployAndSupervise(config: OutboxConfig, log: Logger, say: (line: string) => void, restarts: string[]): Promise<ConnectorSupervisor> {
  await deployConnector(config, { log });
  say(`connector ${config.connector.name} RUNNING`);
  // What production runs beside the connector: the watchdog's supervisor restarts FAILED tasks.
  const supervisor = createConnectorSupervisor({
    config,
    logger: log,
    intervalMs: 1_000,
    backoff: { initialDelayMs: 2_000, maxDelayMs: 30_000 },
    onRestart: (info) => restarts.push(`${info.failed.join(', ')} FAILED (${info.trace ?? 'no trace'}); restarted, attempt ${info.attempt}`),
  });
  supervisor.start();
  return supervisor;
}

interface PartSpawn {
  run: string;
  configFile: string;
  handlersFile: string;
  logDir: string;
  config: OutboxConfig;
  children: Set<ChildProcess>;
}

/** The router or the relay as a CLI process, tracked in `children` until it exits. */
function spawnCliPart(part: 'router' | 'relay', { run, configFile, handlersFile, logDir, config, children }: PartSpawn): ChildProcess {
  const args =
    part === 'router'
      ? ['router', '-c', configFile, '--handlers', handlersFile, '--consumer', run, '--topics', `^${run}\\.outbox\\.event\\.`, '--metrics-port', '0']
      : ['relay', '-c', configFile, '--workers', '4', '--metrics-port', '0'];
  // Its log goes next to the report, so a failed run can be explained.
  const logFd = openSync(join(logDir, `${run}-${part}.log`), 'a');
  const child = spawn(process.execPath, [join(PROJECT_ROOT, 'dist/cli/main.js'), '--log-format', 'json', '--log-level', 'warn', ...args], {
    stdio: ['ignore', logFd, logFd],
    env: { ...process.env, ...stackEnvFor(config) },
  });
  closeSync(logFd);
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

interface FaultContext {
  stack: Stack;
  log: Logger;
  say: (line: string) => void;
  /** The running router (and relay); a killed one is replaced here. */
  parts: { router: ChildProcess; relay: ChildProcess | undefined };
  spawnPart: (part: 'router' | 'relay') => ChildProcess;
}

/** Faults, in order, each at its share of the events; recovery is measured in the background. */
async function injectFaults(options: ChaosOptions, pool: Pool, state: WriteState, ctx: FaultContext): Promise<FaultRecord[]> {
  const { pipeline, profile } = options;
  const faults: FaultRecord[] = [];
  for (const { at, kind } of faultPlan(pipeline).filter((f) => !options.only || options.only.includes(f.kind))) {
    while (state.attempted < profile.events * at && !state.done) await sleep(100);
    const record: FaultRecord = { kind, atCommitted: state.committed.size, recoveryMs: null, notes: [] };
    faults.push(record);
    ctx.say(`fault: ${kind} at ${state.committed.size} committed`);
    const injectedAt = await injectFault(kind, record, ctx);
    // The next fault waits for recovery from this one, so each recovery time is its own.
    record.recoveryMs = await measureRecovery(pool, state, injectedAt, 180_000);
    ctx.say(`recovered from ${kind} in ${record.recoveryMs === null ? 'NOT WITHIN 180 s' : `${(record.recoveryMs / 1000).toFixed(1)} s`}`);
  }
  return faults;
}

/** Injects one fault; returns when it took effect. */
async function injectFault(kind: FaultKind, record: FaultRecord, { stack, log, parts, spawnPart }: FaultContext): Promise<number> {
  // From the moment the fault took effect (a graceful stop takes a while; events committed before it
  // is down are not a recovery).
  let injectedAt = Date.now();
  if (kind === 'kill-router') {
    parts.router.kill('SIGKILL');
    await waitExit(parts.router);
    parts.router = spawnPart('router');
  } else if (kind === 'kill-relay') {
    parts.relay?.kill('SIGKILL');
    if (parts.relay) await waitExit(parts.relay);
    parts.relay = spawnPart('relay');
  } else if (kind === 'kill-connect') {
    record.notes.push(`connect: ${await stack.stopService('connect', { kill: true })}`);
    injectedAt = Date.now();
    await restartStack(stack, log);
  } else if (kind === 'restart-kafka') {
    record.notes.push(`kafka: ${await stack.stopService('kafka')}`);
    injectedAt = Date.now();
    await sleep(2_000);
    await restartStack(stack, log);
  } else if (kind === 'restart-postgres') {
    record.notes.push(`postgres: ${await stack.stopService('postgres')}`);
    injectedAt = Date.now();
    await sleep(2_000);
    await restartStack(stack, log);
  }
  return injectedAt;
}

/** Drain: every committed event handled (or give up after 5 minutes and report what is missing). */
async function drain(pool: Pool, state: WriteState, say: (line: string) => void): Promise<void> {
  const deadline = Date.now() + 300_000;
  let handled = 0;
  for (;;) {
    handled = await countHandled(pool);
    if (handled >= state.committed.size || Date.now() > deadline) break;
    say(`draining: ${handled}/${state.committed.size} handled`);
    await sleep(1_000);
  }
}

async function buildReport(
  { pipeline, profile }: ChaosOptions,
  pool: Pool,
  config: OutboxConfig,
  topic: string,
  state: WriteState,
  { faults, restarts, t0 }: { faults: FaultRecord[]; restarts: string[]; t0: number },
): Promise<ChaosReport> {
  const checks = await verify(pool, state);
  const topicScan = await scanTopic(config, topic, state);
  const slotLagBytes = pipeline === 'cdc' ? await settledSlotLag(pool, config.connector.slotName) : null;
  const latencies = await commitToHandled(pool, state);
  const report: ChaosReport = {
    pipeline,
    exactlyOnce: config.connector.exactlyOnce,
    profile,
    events: {
      attempted: state.attempted,
      committed: state.committed.size,
      rolledBack: state.rolledBack.size,
      notCommittedOnError: state.failed.size,
      ambiguousCommits: state.ambiguous,
    },
    faults,
    lost: checks.lost,
    phantom: checks.phantom + topicScan.phantomOnTopic,
    doubleApplied: checks.doubleApplied,
    orderViolations: checks.orderViolations,
    duplicatesDelivered: topicScan.records - topicScan.distinct,
    recordsOnTopic: topicScan.records,
    slotLagBytes,
    commitToHandledMs: latencies,
    seconds: round((Date.now() - t0) / 1000, 1),
    ok: false,
    connectorRestarts: restarts,
  };
  report.ok =
    report.lost === 0 &&
    report.phantom === 0 &&
    report.doubleApplied === 0 &&
    report.orderViolations === 0 &&
    topicScan.missingOnTopic === 0 &&
    faults.every((f) => f.recoveryMs !== null) &&
    (slotLagBytes === null || slotLagBytes <= 16 * 2 ** 20);
  return report;
}

/** The connector and its slot, the run's database and its topics: each step goes on when another fails. */
async function cleanUpRun(pipeline: Pipeline, config: OutboxConfig, base: OutboxConfig, run: string, log: Logger): Promise<void> {
  if (pipeline === 'cdc') await deleteConnector(config, { dropSlot: true, force: true }).catch((e: Error) => log.warn({ err: e.message }, 'chaos: connector cleanup failed'));
  await withClient(clientConfig(base.database, { database: 'postgres' }), async (c) => {
    await c.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active', [run]);
    await c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(run)} WITH (FORCE)`);
  }).catch((e: Error) => log.warn({ err: e.message }, 'chaos: database cleanup failed'));
  const admin = createKafka(config, { role: 'chaos' }).admin();
  await admin
    .connect()
    .then(async () => {
      const topics = (await admin.listTopics()).filter((t) => t.startsWith(`${run}.`) || t.startsWith(`${run}_`));
      if (topics.length) await admin.deleteTopics({ topics });
    })
    .catch(() => {})
    .finally(() => admin.disconnect().catch(() => {}));
}

function stackEnvFor(config: OutboxConfig): Record<string, string> {
  const { database } = config;
  return { PGHOST: database.host, PGPORT: String(database.port), PGUSER: database.user, PGPASSWORD: database.password ?? '' };
}

async function restartStack(stack: Stack, log: Logger): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await stack.up((e) => log.debug(e.detail));
      return;
    } catch (error) {
      if (attempt >= 5) throw error;
      log.warn({ err: (error as Error).message, attempt }, 'chaos: stack up failed; trying again');
      await sleep(3_000);
    }
  }
}

async function waitExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise((r) => child.once('exit', r));
}
