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
import { describeTables, growthVerdicts, RSS_SLACK_MB, rssMb, sampleTables, TABLE_SLACK, type GrowthVerdict } from '../soak/sampling';
import { CLUSTER_CLIENTS, type StackProfile } from '../stack/settings';
import { createStack } from '../stack/stack';
import { PROJECT_ROOT } from '../stack/paths';
import { commitToHandled, countHandled, scanTopic, settledSlotLag, verify } from './checks';
import { injectFaults, routerName, type Parts } from './faults';
import { fixAndReplay, HANDLERS_JS, parkedState, ROUTER_FAILURE_SETTINGS, waitParkedSettled, type ReplayOutcome } from './handlers';
import { aggregateIds, behindPoison, commitOrderInversions, newWriteState, writeEvents, type WriteState } from './writers';
import type { ChaosOptions, ChaosProfile, ChaosReport, FaultRecord, HandlerFailureReport, Pipeline, ProfileName, SoakReport, SoakSample } from './types';

export { faultPlan } from './faults';

/** What every profile shares: two routers in one group with 4 lanes, shared and hot aggregates, failing handlers. */
const SHARED = {
  aggregates: 200,
  hotAggregates: 4,
  hotShare: 0.3,
  rollbackShare: 0.1,
  maxDelayMs: 20,
  routers: 2,
  lanes: 4,
  partitions: 4,
  flakyShare: 0.02,
} as const;

export const PROFILES: Record<ProfileName, ChaosProfile> = {
  full: { ...SHARED, events: 20_000, writers: 8, rate: 250, poisonEvery: 2_500, replayEverySeconds: 0, minutes: 0, soak: false },
  ci: { ...SHARED, events: 6_000, writers: 8, rate: 200, poisonEvery: 1_500, replayEverySeconds: 0, minutes: 0, soak: false },
  // A steady moderate rate for `minutes` (events follows from it), faults spaced out over the run, the
  // poison fixed and replayed every 2 minutes, and short retention windows, so nothing may grow.
  soak: { ...SHARED, events: 0, writers: 4, rate: 50, poisonEvery: 3_000, replayEverySeconds: 120, minutes: 30, soak: true },
};

/** The soak profile's events for `minutes`, or the profile as it is. */
export function profileFor(name: ProfileName, overrides: { events?: number; minutes?: number } = {}): ChaosProfile {
  const base = PROFILES[name];
  const minutes = overrides.minutes ?? base.minutes;
  const events = overrides.events ?? (base.soak ? Math.round(base.rate * 60 * minutes) : base.events);
  return { ...base, minutes, events };
}

/** Retention windows of the soak profile: months compressed into minutes, as the data-lifecycle run does. */
const SOAK_SETTINGS = {
  router: { inboxRetentionMs: 120_000, allowShortInboxRetention: true, inboxPruneIntervalMs: 15_000 },
  relay: { retentionMs: 60_000, cleanupIntervalMs: 15_000 },
  cleanupIntervalMs: 15_000,
};

/**
 * One chaos run: concurrent writers on shared aggregates (some transactions rolled back on purpose,
 * start order unlike commit order) push events through CDC (Debezium) or the polling relay to two
 * router processes in one group, while faults are injected on the real stack; some handlers fail (a few
 * until the run fixes them and replays the DLQ). Afterwards the database and the topic are checked:
 * every committed event applied exactly once, nothing from a rolled-back transaction anywhere,
 * per-aggregate commit order intact at the handler, nothing left parked.
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
    ...clusterClients(stack.profile),
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
  const router = { consumer: run, lanes: profile.lanes, ...ROUTER_FAILURE_SETTINGS, ...(profile.soak ? SOAK_SETTINGS.router : {}) };
  writeFileSync(configFile, JSON.stringify({ ...clusterClients(stack.profile), database: { database: run }, connector: overrides.connector, relay: profile.soak ? SOAK_SETTINGS.relay : {}, router }));
  const handlersFile = join(dir, 'handlers.js');
  writeFileSync(handlersFile, HANDLERS_JS);
  const topic = topicForReplacement(topicReplacement)('order');
  const restarts: string[] = [];
  let supervisor: ConnectorSupervisor | undefined;
  const logDir = options.logDir ?? join(PROJECT_ROOT, 'reports');
  mkdirSync(logDir, { recursive: true });
  const children = new Set<ChildProcess>();
  let pool: Pool | undefined;
  const stopBackground = new AbortController();
  try {
    await provision(config);
    pool = createPool(config.database, { max: profile.writers + 6, application_name: 'outbox-chaos' });
    pool.on('error', () => {});
    await prepareTablesAndTopic(pool, config, profile, topic, log);
    if (pipeline === 'cdc') supervisor = await deployAndSupervise(config, log, say, restarts);

    const spawn = { run, configFile, handlersFile, logDir, config, children };
    const parts: Parts = {
      routers: Array.from({ length: profile.routers }, (_, i) => spawnCliPart(routerName(i), spawn, ['--lanes', String(profile.lanes)])),
      relay: pipeline === 'relay' ? spawnCliPart('relay', spawn) : undefined,
    };
    const cleanup = profile.soak && pipeline === 'cdc' ? keepRunning(() => spawnCliPart('cleanup', spawn), children, stopBackground.signal) : undefined;

    const codec = createCodec({ registry: config.registry, topicFor: topicForReplacement(topicReplacement) });
    const writer = createOutboxWriter({ outbox: config.outbox, codec });
    const state = newWriteState();
    const writeStart = Date.now();
    const writing = writeEvents(pool, writer, profile, state);
    writing.catch(() => {});
    const replayContext = { configFile, consumer: run, env: stackEnvFor(config) };
    const replays: ReplayOutcome[] = [];
    let endReplays = 0;
    const background: Array<Promise<unknown>> = [];
    if (profile.replayEverySeconds > 0) background.push(replayEvery(pool, state, replayContext, profile.replayEverySeconds, replays, say, stopBackground.signal));
    const samples: SoakSample[] = [];
    if (profile.soak) {
      const processes = () => ({ ...Object.fromEntries(parts.routers.map((p, i) => [routerName(i), p.pid])), ...(parts.relay ? { relay: parts.relay.pid } : {}), ...(cleanup ? { cleanup: cleanup.current()?.pid } : {}) });
      background.push(sampleEachMinute(pool, config.connector.slotName, state, processes, samples, say, stopBackground.signal));
    }

    const faults = await injectFaults(options, pool, state, { stack, config, topic, log, say, parts, spawnRouter: (i) => spawnCliPart(routerName(i), spawn, ['--lanes', String(profile.lanes)]), spawnRelay: () => spawnCliPart('relay', spawn) });
    const writeUntil = writeStart + profile.minutes * 60_000;
    while (state.attempted < profile.events || Date.now() < writeUntil) await sleep(100);
    state.stopWriting = true;
    await writing;
    stopBackground.abort();
    await Promise.all(background);
    say(`writes done: ${state.committed.size} committed, ${state.rolledBack.size} rolled back, ${state.ambiguous} ambiguous commits resolved`);

    // Everything not behind a poison event is applied, everything behind one dead-lettered; then the fix and the replay.
    const parked = [...state.committed.values()].filter((e) => behindPoison(state, e)).length;
    await drain(pool, state.committed.size - parked, say);
    if (!(await waitParkedSettled(pool, run, state, 120_000))) say('not every event behind a poison event was dead-lettered within 120 s');
    for (let i = 0; i < 3; i++) {
      const outcome = await fixAndReplay(pool, state, { ...replayContext, olderThanMs: 0, followMs: 30_000 });
      replays.push(outcome);
      endReplays++;
      say(`fixed ${outcome.fixed} poison events; dlq:replay re-published ${outcome.replayed}${outcome.resent ? ` (${outcome.resent} sent again: they reached the router before their key's head)` : ''}${outcome.stillParked.length ? `, still parked: ${outcome.stillParked.join(', ')}` : ''}${outcome.error ? `; failed: ${outcome.error}` : ''}`);
      if ((await parkedState(pool, run, [])).parkedRows === 0) break;
    }
    await drain(pool, state.committed.size, say);
    await sleep(2_000); // a late duplicate would show up in the checks below
    const soak = profile.soak ? { minutes: profile.minutes, samples, verdicts: soakVerdicts(samples) } : undefined;
    const firstEndReplay = replays[replays.length - endReplays];
    return await buildReport(options, pool, config, topic, state, { topology: stack.profile, faults, restarts, t0, replays, firstEndReplay, consumer: run, soak });
  } finally {
    stopBackground.abort();
    await supervisor?.stop();
    for (const child of children) child.kill('SIGKILL');
    await pool?.end().catch(() => {});
    await cleanUpRun(pipeline, config, base, run, log);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The tables the handler and the writers use (one business row per aggregate: its lock and its commit-order counter), the schemas, and the routed topic. */
async function prepareTablesAndTopic(pool: Pool, config: OutboxConfig, profile: ChaosProfile, topic: string, log: Logger): Promise<void> {
  await pool.query('CREATE TABLE chaos_business (aggregate_id text PRIMARY KEY, seq int NOT NULL DEFAULT 0)');
  await pool.query('INSERT INTO chaos_business (aggregate_id) SELECT unnest($1::text[])', [aggregateIds(profile)]);
  await pool.query('CREATE TABLE chaos_work (n bigserial PRIMARY KEY, writer int NOT NULL, aggregate_id text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())');
  await pool.query('CREATE TABLE chaos_effects (n bigserial PRIMARY KEY, event_id uuid NOT NULL, aggregate_id text NOT NULL, seq int NOT NULL, handled_at timestamptz NOT NULL DEFAULT clock_timestamp())');
  await pool.query('CREATE TABLE chaos_fixed (event_id uuid PRIMARY KEY)');
  await registerSchemas(config, { log });
  const admin = createKafka(config, { role: 'chaos' }).admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: profile.partitions }], waitForLeaders: true });
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

type PartName = ReturnType<typeof routerName> | 'relay' | 'cleanup';

/** A router (router-a, router-b, …), the relay or the CDC outbox cleanup as a CLI process, tracked in `children` until it exits. */
function spawnCliPart(part: PartName, { run, configFile, handlersFile, logDir, config, children }: PartSpawn, extra: string[] = []): ChildProcess {
  const args = part.startsWith('router')
    ? ['router', '-c', configFile, '--handlers', handlersFile, '--consumer', run, '--topics', `^${run}\\.outbox\\.event\\.`, '--metrics-port', '0', ...extra]
    : part === 'relay'
      ? ['relay', '-c', configFile, '--workers', '4', '--metrics-port', '0', ...extra]
      : ['outbox:cleanup', '-c', configFile, '--interval-ms', String(SOAK_SETTINGS.cleanupIntervalMs), ...extra];
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

/** A process started again whenever it exits (a supervisor's part), until `signal` aborts. */
function keepRunning(start: () => ChildProcess, children: Set<ChildProcess>, signal: AbortSignal): { current(): ChildProcess | undefined } {
  let current: ChildProcess | undefined;
  const launch = () => {
    if (signal.aborted) return;
    current = start();
    current.once('exit', () => void sleep(2_000).then(launch));
  };
  launch();
  signal.addEventListener('abort', () => {
    for (const child of children) if (child === current) child.kill('SIGTERM');
  });
  return { current: () => current };
}

/** The soak profile's fixer: every `seconds`, the poison older than a minute is fixed and dlq:replay runs. */
async function replayEvery(
  pool: Pool,
  state: WriteState,
  context: { configFile: string; consumer: string; env: Record<string, string> },
  seconds: number,
  replays: ReplayOutcome[],
  say: (line: string) => void,
  signal: AbortSignal,
): Promise<void> {
  while (!signal.aborted) {
    await sleepUnlessAborted(seconds * 1000, signal);
    if (signal.aborted) return;
    const outcome = await fixAndReplay(pool, state, { ...context, olderThanMs: 60_000, followMs: 10_000 }).catch((e: Error) => ({ fixed: 0, replayed: 0, resent: 0, stillParked: [], error: e.message }));
    replays.push(outcome);
    say(`fixed ${outcome.fixed} poison events so far; dlq:replay re-published ${outcome.replayed}${outcome.error ? `; failed: ${outcome.error}` : ''}`);
  }
}

/** The soak profile's sampler: each minute, table sizes, slot lag and the RSS of every Node process of the pipeline. */
async function sampleEachMinute(
  pool: Pool,
  slot: string,
  state: WriteState,
  processes: () => Record<string, number | undefined>,
  samples: SoakSample[],
  say: (line: string) => void,
  signal: AbortSignal,
): Promise<void> {
  const start = Date.now();
  for (let minute = 1; !signal.aborted; minute++) {
    await sleepUnlessAborted(start + minute * 60_000 - Date.now(), signal);
    if (signal.aborted) return;
    try {
      const tables = await sampleTables(pool, slot);
      const rss = Object.fromEntries(Object.entries(processes()).map(([name, pid]) => [name, rssMb(pid)]));
      const sample: SoakSample = { minute, ...tables, committed: state.committed.size, handled: await countHandled(pool), rssMb: rss };
      samples.push(sample);
      say(`min ${String(minute).padStart(3)}: ${describeTables(sample)}, RSS ${Object.entries(rss).map(([n, mb]) => `${n} ${mb} MB`).join(', ')}, committed ${sample.committed}, handled ${sample.handled}`);
    } catch (error) {
      say(`min ${minute}: no sample (${(error as Error).message})`); // a fault may have the database down
    }
  }
}

/** Growth verdicts of the soak: the tables and slot lag, and each process's RSS. */
export function soakVerdicts(samples: readonly SoakSample[]): GrowthVerdict[] {
  const names = [...new Set(samples.flatMap((s) => Object.keys(s.rssMb)))];
  const flat = samples.map((s) => ({ ...s, ...Object.fromEntries(names.map((n) => [`rssMb.${n}`, s.rssMb[n] ?? 0])) }) as unknown as Record<string, number>);
  return growthVerdicts(flat, [...TABLE_SLACK, ...names.map((n) => [`rssMb.${n}`, RSS_SLACK_MB] as const)]);
}

async function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done);
  });
}

/** Drain: until `target` events are handled, or nothing moved for `stallMs` (give up and report what is missing). */
async function drain(pool: Pool, target: number, say: (line: string) => void, stallMs = 60_000): Promise<void> {
  let last = -1;
  let movedAt = Date.now();
  for (;;) {
    const handled = await countHandled(pool);
    if (handled !== last) [last, movedAt] = [handled, Date.now()];
    if (handled >= target || Date.now() - movedAt > stallMs) break;
    say(`draining: ${handled}/${target} handled`);
    await sleep(1_000);
  }
}

async function buildReport(
  { pipeline, profile }: ChaosOptions,
  pool: Pool,
  config: OutboxConfig,
  topic: string,
  state: WriteState,
  {
    faults,
    restarts,
    t0,
    replays,
    firstEndReplay,
    consumer,
    soak,
    topology,
  }: { topology: StackProfile; faults: FaultRecord[]; restarts: string[]; t0: number; replays: ReplayOutcome[]; firstEndReplay?: ReplayOutcome; consumer: string; soak?: SoakReport },
): Promise<ChaosReport> {
  const checks = await verify(pool, state);
  const topicScan = await scanTopic(config, topic, state);
  const slotLagBytes = pipeline === 'cdc' ? await settledSlotLag(pool, config.connector.slotName) : null;
  const latencies = await commitToHandled(pool, state);
  const committed = [...state.committed.values()];
  const handlerFailures: HandlerFailureReport = {
    flakyEvents: committed.filter((e) => e.fail === 'flaky').length,
    poisonEvents: committed.filter((e) => e.fail === 'poison').length,
    parkedAggregates: state.parkedFrom.size,
    eventsBehindPoison: committed.filter((e) => behindPoison(state, e)).length,
    replays: replays.length,
    replayed: replays.reduce((n, r) => n + r.replayed, 0),
    stillParkedAfterFirstReplay: firstEndReplay?.stillParked ?? [],
    stillParked: replays.at(-1)?.stillParked ?? [],
    parkedRowsAtEnd: (await parkedState(pool, consumer, [])).parkedRows,
  };
  const report: ChaosReport = {
    pipeline,
    topology,
    exactlyOnce: config.connector.exactlyOnce,
    profile,
    events: {
      attempted: state.attempted,
      committed: state.committed.size,
      rolledBack: state.rolledBack.size,
      notCommittedOnError: state.failed.size,
      ambiguousCommits: state.ambiguous,
      commitOrderInversions: commitOrderInversions(state.committed.values()),
    },
    faults,
    lost: checks.lost,
    phantom: checks.phantom + topicScan.phantomOnTopic,
    doubleApplied: checks.doubleApplied,
    orderViolations: checks.orderViolations,
    duplicatesDelivered: topicScan.duplicates,
    recordsOnTopic: topicScan.records,
    replayedRecordsOnTopic: topicScan.replayed,
    slotLagBytes,
    commitToHandledMs: latencies,
    seconds: round((Date.now() - t0) / 1000, 1),
    ok: false,
    connectorRestarts: restarts,
    handlerFailures,
    ...(soak ? { soak } : {}),
  };
  report.ok =
    report.lost === 0 &&
    report.phantom === 0 &&
    report.doubleApplied === 0 &&
    report.orderViolations === 0 &&
    topicScan.missingOnTopic === 0 &&
    // KIP-618's promise: read_committed sees each committed event once, whatever was killed.
    (!report.exactlyOnce || report.duplicatesDelivered === 0) &&
    handlerFailures.parkedRowsAtEnd === 0 &&
    faults.every((f) => f.recoveryMs !== null) &&
    (slotLagBytes === null || slotLagBytes <= 16 * 2 ** 20) &&
    (!soak || soak.verdicts.every((v) => v.flat));
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

/** On the cluster profile every client gets the whole cluster (CLUSTER_CLIENTS). */
function clusterClients(profile: StackProfile): Pick<OutboxOptions, 'kafka' | 'connect'> {
  return profile === 'cluster' ? { kafka: { brokers: [...CLUSTER_CLIENTS.kafka.brokers] }, connect: { fallbackUrls: [...CLUSTER_CLIENTS.connect.fallbackUrls] } } : {};
}

function stackEnvFor(config: OutboxConfig): Record<string, string> {
  const { database } = config;
  return { PGHOST: database.host, PGPORT: String(database.port), PGUSER: database.user, PGPASSWORD: database.password ?? '' };
}
