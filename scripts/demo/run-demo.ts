import { setTimeout as sleep } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { createCodec, registerSchemas, topicForReplacement } from 'outbox-router/codec';
import type { OutboxConfig } from 'outbox-router/config';
import { deployConnector } from 'outbox-router/connector';
import { createPool } from 'outbox-router/db';
import { createKafka } from 'outbox-router/kafka';
import { OutboxError } from 'outbox-router/errors';
import { createOutboxWriter } from 'outbox-router/producer';
import { provision } from 'outbox-router/provision';
import { createRouter, type EventTypeHandler, type HandlerContext, type Handlers, type RoutedEvent } from 'outbox-router/router';
import { createConnectorSupervisor, createWatchdog } from 'outbox-router/watchdog';
import { ORDERS_DDL, createOrder } from '../../examples/create-order';
import exampleHandlers from '../../examples/order-handlers';
import { createStack } from '../stack/stack';
import { percentiles, round } from '../bench/stats';
import type { DemoOptions, DemoStack, DemoSummary } from './types';

/** The demo's own record of what the handler saw, written in the handler's transaction. */
const DEMO_DDL = `CREATE TABLE IF NOT EXISTS demo_handled (
  event_id   uuid        NOT NULL,
  order_id   uuid        NOT NULL,
  handled_at timestamptz NOT NULL DEFAULT clock_timestamp()
)`;

/**
 * `npm run demo`: the whole pipeline on the local stack, end to end. Stack (started if needed) →
 * provision → schemas → connector → router with the example handlers (+ watchdog) → the source
 * article's CreateOrder at a steady rate, some transactions rolled back on purpose → wait until every
 * committed event is handled → a summary that proves (from the database) each committed event was
 * handled exactly once and no rolled-back one was seen.
 */
export async function runDemo(options: DemoOptions): Promise<DemoSummary> {
  const { config, log } = options;
  const t0 = Date.now();
  const stack = options.stack ?? plainStack();
  const wasRunning = await stack.ready();
  log.info(wasRunning ? 'stack: already running' : 'stack: starting (first run downloads the jars)…');
  await stack.up((detail) => log.info(`stack: ${detail}`));
  const stackUp = Date.now();

  const report = await provision(config);
  log.info(`database: ${report.applied.length ? `applied ${report.applied.join(', ')}` : 'up to date'}`);
  const schemas = await registerSchemas(config, { log });
  log.info(`schemas: ${schemas.length} registered`);
  const deployed = await deployConnector(config, { log, onProgress: (p) => log.debug(`connector: ${p.step} ${p.detail}`) });
  log.info(`connector ${config.connector.name}: ${deployed.action}, RUNNING`);

  const pool = createPool(config.database, { max: 12, application_name: 'outbox-demo' });
  // The watchdog polls the connector's slot in-process (every 2 s here), as it would beside a real deployment.
  const watchdogConfig = Object.freeze({ ...config, watchdog: { ...config.watchdog, intervalMs: 2_000 } }) as OutboxConfig;
  const watchdog = createWatchdog({ config: watchdogConfig, logger: log.child({ part: 'watchdog' }) });
  const supervisor = createConnectorSupervisor({ config, logger: log.child({ part: 'watchdog' }), intervalMs: 2_000 });
  const consumer = 'outbox-demo';
  const companions = [
    {
      name: 'watchdog',
      start: async () => {
        const first = await watchdog.pollOnce();
        if (!first.ok) log.warn({ err: first.error?.message }, 'watchdog: first poll failed');
        watchdog.start();
        supervisor.start();
      },
      stop: async () => {
        await supervisor.stop();
        await watchdog.stop(1_000);
      },
      summary: () => {
        const h = watchdog.health();
        return { lastPollOk: h.lastPollOk, alertsFiring: h.firing, slotsWatched: h.slots, connectorRestarts: supervisor.stats().restarts };
      },
    },
    ...(options.companions ?? []),
  ];
  const router = createRouter({
    config,
    handlers: demoHandlers(exampleHandlers),
    consumer,
    logger: log.child({ part: 'router' }),
    // only the demo's aggregate type: other routed topics on the stack are not the demo's business
    topics: new RegExp(`^${escapeRegExp(topicForReplacement(config.connector.topicReplacement)('order'))}$`),
    partitionsConsumedConcurrently: 2,
    topicRefreshMs: 1_000,
  });
  const started: Array<{ stop(): Promise<void> }> = [];
  try {
    await pool.query(ORDERS_DDL);
    await pool.query(DEMO_DDL);
    // Connect would create the routed topic with the first event; creating it now (broker defaults)
    // lets the router join before the first order instead of a topic refresh later.
    await ensureTopic(config, topicForReplacement(config.connector.topicReplacement)('order'));
    await router.start();
    started.push(router);
    for (const c of companions) {
      await c.start();
      started.push(c);
    }
    await pipelineReady(pool, router, config.connector.slotName, options.drainTimeoutMs ?? 120_000);
    const ready = Date.now();
    log.info(`pipeline ready ${round((ready - stackUp) / 1000, 1)} s after the stack was up: connector streaming, router joined`);

    const codec = createCodec({ registry: config.registry, topicFor: topicForReplacement(config.connector.topicReplacement) });
    const writer = createOutboxWriter({ outbox: config.outbox, codec });
    const warmup = await warmUp(pool, writer, options);
    const measuredFrom = Date.now();
    const { committed, rolledBack } = await writeOrders(pool, writer, options);
    log.info(`wrote ${committed.size} committed and ${rolledBack.size} rolled-back orders`);

    const deadline = Date.now() + (options.drainTimeoutMs ?? 120_000);
    let seen = await handledCounts(pool, committed, rolledBack);
    while (seen.handled < committed.size && Date.now() < deadline) {
      options.progress?.('handle', seen.handled, committed.size);
      await sleep(250);
      seen = await handledCounts(pool, committed, rolledBack);
    }
    options.progress?.('handle', seen.handled, committed.size);
    // A moment more, so a late duplicate or a late rolled-back event would be counted too.
    await sleep(1_000);
    seen = await handledCounts(pool, committed, rolledBack);

    const latencies = await commitToHandled(pool, committed);
    const slot = await slotLag(pool, config.connector.slotName);
    const stats = router.stats();
    const summary: DemoSummary = {
      consumer,
      committed: committed.size,
      rolledBack: rolledBack.size,
      handled: seen.handled,
      handledTwice: seen.twice,
      notHandled: committed.size - seen.handled,
      rolledBackSeen: seen.rolledBackSeen,
      duplicatesSkipped: stats.duplicates,
      deadLettered: stats.deadLettered,
      commitToHandledMs: latencies,
      coldStart: {
        stackSeconds: round((stackUp - t0) / 1000, 1),
        readySeconds: round((ready - stackUp) / 1000, 1),
        warmupSeconds: round((measuredFrom - ready) / 1000, 1),
        warmupEvents: warmup.events,
        warmupHandled: warmup.handled,
      },
      slot,
      companions: Object.fromEntries(companions.map((c) => [c.name, c.summary?.() ?? {}])),
      seconds: round((Date.now() - t0) / 1000, 1),
      ok: false,
    };
    summary.ok = summary.notHandled === 0 && summary.handledTwice === 0 && summary.rolledBackSeen === 0 && summary.deadLettered === 0;
    return summary;
  } finally {
    for (const part of started.reverse()) await part.stop().catch((e: Error) => log.warn({ err: e.message }, 'demo: stop failed'));
    await pool.end().catch(() => {});
    if (!options.keep && !wasRunning) {
      log.info('stack: stopping (it was not running before the demo; --keep leaves it up)');
      await stack.down((detail) => log.debug(detail));
    }
  }
}

function plainStack(): DemoStack {
  const stack = createStack();
  return {
    ready: async () => (await stack.status()).every((s) => s.ready),
    up: async (onStep) => void (await stack.up((e) => onStep(e.detail))),
    down: (onStep) => stack.down({}, (e) => onStep(e.detail)),
  };
}

/** The example's handlers, each also recording (event id, order id) in demo_handled in the same transaction. */
function demoHandlers(base: Handlers): Handlers {
  const record = (events: ReadonlyArray<RoutedEvent>, ctx: HandlerContext) =>
    ctx.tx.query('INSERT INTO demo_handled (event_id, order_id) SELECT * FROM unnest($1::uuid[], $2::uuid[])', [events.map((e) => e.id), events.map((e) => (e.payload as { orderId: string }).orderId)]);
  const wrapped: Record<string, Record<string, EventTypeHandler>> = {};
  for (const [aggregateType, byType] of Object.entries(base)) {
    wrapped[aggregateType] = {};
    for (const [type, handler] of Object.entries(byType)) {
      (wrapped[aggregateType] as Record<string, EventTypeHandler>)[type] =
        typeof handler === 'function'
          ? async (event, ctx) => {
              await handler(event, ctx);
              await record([event], ctx);
            }
          : {
              batch: async (events, ctx) => {
                await handler.batch(events, ctx);
                await record(events, ctx);
              },
            };
    }
  }
  return wrapped;
}

/** The connector's slot is streaming (active) and the router has its partitions: the first order will not wait for either. */
async function pipelineReady(pool: Pool, router: { health(): { joined: boolean } }, slot: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await pool.query<{ active: boolean }>('SELECT active FROM pg_replication_slots WHERE slot_name = $1', [slot]);
    if (rows[0]?.active && router.health().joined) return;
    if (Date.now() > deadline) {
      const active = rows[0]?.active ?? 'missing';
      const joined = router.health().joined;
      throw new OutboxError(
        'DEMO_NOT_READY',
        `demo: the pipeline was not ready within ${timeoutMs} ms (slot ${slot} active: ${active}, router joined: ${joined}). ` +
          'Check `outbox connector:status` and `npm run stack:status`, then run the demo again.',
        { retriable: true, details: { slot, active, joined, timeoutMs } },
      );
    }
    await sleep(100);
  }
}

/**
 * Orders at the demo's rate for `warmupSeconds`, none rolled back, then a wait until each is handled.
 * They are counted apart and excluded from the summary's counts and percentiles.
 */
async function warmUp(pool: Pool, writer: ReturnType<typeof createOutboxWriter>, options: DemoOptions): Promise<{ events: number; handled: number }> {
  const events = Math.round((options.warmupSeconds ?? 20) * options.rate);
  if (events <= 0) return { events: 0, handled: 0 };
  options.log.info(`warming up: ${events} unmeasured orders at ${options.rate}/s`);
  const { committed } = await writeOrders(pool, writer, { ...options, events, rollbackShare: 0, progress: undefined });
  const deadline = Date.now() + (options.drainTimeoutMs ?? 120_000);
  let handled = 0;
  while (Date.now() < deadline) {
    handled = (await handledCounts(pool, committed, new Set())).handled;
    if (handled >= committed.size) break;
    await sleep(100);
  }
  options.log.info(`warm-up: ${handled}/${committed.size} handled`);
  return { events: committed.size, handled };
}

/** CreateOrder at `rate` per second from a few concurrent writers; every n-th fails before COMMIT on purpose. */
async function writeOrders(
  pool: Pool,
  writer: ReturnType<typeof createOutboxWriter>,
  options: Pick<DemoOptions, 'events' | 'rate' | 'rollbackShare' | 'progress'>,
): Promise<{ committed: Map<string, number>; rolledBack: Set<string> }> {
  const committed = new Map<string, number>(); // event id → commit time (ms)
  const rolledBack = new Set<string>(); // order ids
  const concurrency = 4;
  const intervalMs = 1000 / options.rate;
  const started = Date.now();
  let next = 0;
  const worker = async () => {
    for (;;) {
      const n = next++;
      if (n >= options.events) return;
      const due = started + n * intervalMs;
      const wait = due - Date.now();
      if (wait > 0) await sleep(wait);
      const fail = options.rollbackShare > 0 && (n + 1) % Math.round(1 / options.rollbackShare) === 0;
      const orderId = randomUUID();
      try {
        const created = await createOrder(
          pool,
          writer,
          { id: orderId, customerId: `customer-${n % 50}`, currency: 'EUR', lines: [{ sku: `sku-${n % 7}`, quantity: 1 + (n % 3), priceCents: 1999 }] },
          { failBeforeCommit: fail },
        );
        committed.set(created.event.id, Date.now());
      } catch (error) {
        if (!fail) throw error;
        rolledBack.add(orderId);
      }
      options.progress?.('write', committed.size + rolledBack.size, options.events);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { committed, rolledBack };
}

async function handledCounts(pool: Pool, committed: Map<string, number>, rolledBack: Set<string>): Promise<{ handled: number; twice: number; rolledBackSeen: number }> {
  const { rows } = await pool.query<{ handled: string; twice: string }>(
    `SELECT count(*) FILTER (WHERE n >= 1) AS handled, count(*) FILTER (WHERE n > 1) AS twice
       FROM (SELECT event_id, count(*) AS n FROM demo_handled WHERE event_id = ANY($1::uuid[]) GROUP BY event_id) t`,
    [[...committed.keys()]],
  );
  const seen = await pool.query<{ n: string }>('SELECT count(*) AS n FROM demo_handled WHERE order_id = ANY($1::uuid[])', [[...rolledBack]]);
  return { handled: Number(rows[0]?.handled ?? 0), twice: Number(rows[0]?.twice ?? 0), rolledBackSeen: Number(seen.rows[0]?.n ?? 0) };
}

async function commitToHandled(pool: Pool, committed: Map<string, number>): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ event_id: string; at: string }>(
    'SELECT event_id, (extract(epoch FROM min(handled_at)) * 1000)::float8 AS at FROM demo_handled WHERE event_id = ANY($1::uuid[]) GROUP BY event_id',
    [[...committed.keys()]],
  );
  const latencies = rows.map((r) => Math.max(0, Number(r.at) - (committed.get(r.event_id) as number)));
  return Object.fromEntries(Object.entries(percentiles(latencies, [50, 95, 99])).map(([k, v]) => [k, round(v, 1)]));
}

async function slotLag(pool: Pool, slot: string): Promise<DemoSummary['slot']> {
  const { rows } = await pool.query<{ active: boolean; lag: string | null; wal_status: string | null }>(
    `SELECT active, pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint AS lag, wal_status FROM pg_replication_slots WHERE slot_name = $1`,
    [slot],
  );
  const row = rows[0];
  return { name: slot, active: row?.active ?? null, lagBytes: row?.lag == null ? null : Number(row.lag), walStatus: row?.wal_status ?? null };
}

export function formatDemo(s: DemoSummary): string {
  const yes = (ok: boolean) => (ok ? 'ok' : 'FAILED');
  const lines = [
    `outbox demo — ${s.ok ? 'every committed event handled exactly once' : 'PROBLEMS FOUND'} (${s.seconds} s)`,
    '',
    `  events committed             ${s.committed}`,
    `  events handled               ${s.handled}   ${yes(s.notHandled === 0)}${s.notHandled ? ` (${s.notHandled} not handled)` : ''}`,
    `  handled more than once       ${s.handledTwice}   ${yes(s.handledTwice === 0)}`,
    `  rolled-back transactions     ${s.rolledBack}`,
    `  rolled-back events seen      ${s.rolledBackSeen}   ${yes(s.rolledBackSeen === 0)}`,
    `  duplicates skipped (inbox)   ${s.duplicatesSkipped}`,
    `  dead letters                 ${s.deadLettered}   ${yes(s.deadLettered === 0)}`,
    `  commit → handled             p50 ${s.commitToHandledMs.p50} ms, p95 ${s.commitToHandledMs.p95} ms, p99 ${s.commitToHandledMs.p99} ms (after the warm-up)`,
    `  cold start                   stack ${s.coldStart.stackSeconds} s, then pipeline ready in ${s.coldStart.readySeconds} s, warm-up ${s.coldStart.warmupSeconds} s (${s.coldStart.warmupEvents} orders, not counted above)`,
    `  slot ${s.slot.name}   ${s.slot.active === null ? 'missing' : `${s.slot.active ? 'active' : 'INACTIVE'}, lag ${s.slot.lagBytes ?? '?'} bytes, wal_status ${s.slot.walStatus ?? '?'}`}`,
  ];
  for (const [name, facts] of Object.entries(s.companions)) lines.push(`  ${name.padEnd(28)} ${Object.entries(facts).map(([k, v]) => `${k} ${typeof v === 'object' ? JSON.stringify(v) : String(v)}`).join(', ')}`);
  return lines.join('\n');
}

async function ensureTopic(config: OutboxConfig, topic: string): Promise<void> {
  const admin = createKafka(config, { role: 'demo' }).admin();
  await admin.connect();
  try {
    if (!(await admin.listTopics()).includes(topic)) await admin.createTopics({ topics: [{ topic }], waitForLeaders: true });
  } finally {
    await admin.disconnect();
  }
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
