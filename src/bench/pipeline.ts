/**
 * End to end through one pipeline (Debezium or the polling relay): COMMIT of the business transaction
 * → the handler's effect committed by the router (Avro, inbox, one row written through ctx.tx).
 *
 * The router runs in this process (createRouter), so both ends are read from one clock: the commit
 * time is Date.now() right after the writer's COMMIT returns, the handled time is Date.now() when the
 * router reports `router.applied` for the event, which it does after the inbox transaction (inbox row +
 * the handler's row) has committed. The record's Kafka timestamp splits the path in two: commit → Kafka
 * (connector or relay) and Kafka → handled (router).
 */
import { randomUUID } from 'node:crypto';
import type { Client, Pool } from 'pg';
import type { OutboxConfig } from '../config';
import type { OutboxWriter } from '../producer';
import { createRouter, type Router } from '../router';
import { createLogger } from '../log';
import { startLoad, type Load, type LoadWindow } from './load';
import type { Progress } from './progress';
import { percentiles, round } from './stats';

export interface RateRun {
  rate: number;
  seconds: number;
  committed: number;
  /** Commits per second actually reached (the writer may fall short of the asked rate). */
  committedPerSec: number;
  handled: number;
  /** Committed but not handled within the wait after the run. */
  missing: number;
  commitToHandledMs: Record<string, number>;
  commitToKafkaMs: Record<string, number>;
  kafkaToHandledMs: Record<string, number>;
  /** Duration of the router's inbox transaction that applied each event (p50/p99 over events). */
  routerTransactionMs: Record<string, number>;
  /** Writer transactions per second (its share of dbXactPerSec). */
  writerXactPerSec: number;
  /** The relay's statements per second (relay.stats().queries), relay pipeline only. */
  relayStatementsPerSec?: number;
  load: Load;
}

export interface SustainedRun {
  seconds: number;
  writers: number;
  eventsPerTransaction: number;
  committed: number;
  handled: number;
  /** Over the steady window (the second half of the writing time). */
  steady: {
    seconds: number;
    committedPerSec: number;
    handledPerSec: number;
    backlogStart: number;
    backlogEnd: number;
    backlogGrew: boolean;
    /** Where the backlog waited, for events committed in the window: commit → Kafka and Kafka → handled, p50. */
    commitToKafkaP50Ms: number;
    kafkaToHandledP50Ms: number;
  };
  /** From the first commit to the last event handled, after the writers stopped and the backlog drained. */
  /** drainPerSec: events handled per second after the writers stopped (the pipeline without writers competing). */
  overall: { seconds: number; handledPerSec: number; drainSeconds: number; drainPerSec: number; missing: number };
  writerXactPerSec: number;
  relayStatementsPerSec?: number;
  load: Load;
}

export interface PipelineRun {
  pipeline: 'cdc' | 'relay';
  fixed: RateRun[];
  sustained?: SustainedRun;
}

export interface PipelineOptions {
  pipeline: 'cdc' | 'relay';
  /** Inbox consumer and Kafka group of the router. */
  consumer: string;
  config: OutboxConfig;
  pool: Pool;
  writer: OutboxWriter;
  /** Routed topics of this pipeline only. */
  topics: RegExp;
  rates: number[];
  seconds: number;
  sustainedSeconds: number;
  writers: number;
  eventsPerTransaction: number;
  /** A client on the `postgres` database for pg_stat_database. */
  admin?: Client;
  relayQueries?: () => number;
  progress: Progress;
}

const ORDER = 'INSERT INTO orders (id, customer_id, currency, total_cents, status) SELECT unnest($1::uuid[]), $2, $3, $4, $5';
/** The writer pool's size (createBenchDatabase). */
const MAX_IN_FLIGHT = 16;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function measurePipeline(options: PipelineOptions): Promise<PipelineRun> {
  const { pool, writer, progress } = options;
  const commitAt = new Map<string, number>();
  const handledAt = new Map<string, number>();
  const kafkaAt = new Map<string, number>();
  /** The router's inbox transaction that applied each event, start to COMMIT (shared by a chunk's records). */
  const transactionMs = new Map<string, number>();
  let writerXacts = 0;
  await pool.query('CREATE TABLE IF NOT EXISTS bench_effects (id uuid PRIMARY KEY, aggregate_id text NOT NULL)');

  const router: Router = createRouter({
    config: options.config,
    consumer: options.consumer,
    topics: options.topics,
    topicRefreshMs: 0,
    logger: createLogger({ name: 'bench-router', level: 'warn' }),
    handlers: {
      order: {
        OrderCreated: async (event, { tx }) => {
          await tx.query('INSERT INTO bench_effects (id, aggregate_id) VALUES ($1, $2)', [event.id, event.aggregateId]);
          if (event.createdAt) kafkaAt.set(event.id, event.createdAt.getTime());
        },
      },
    },
    onEvent: (name, data) => {
      if (name === 'router.applied' && typeof data.id === 'string' && !handledAt.has(data.id)) {
        handledAt.set(data.id, Date.now());
        if (typeof data.transactionMs === 'number') transactionMs.set(data.id, data.transactionMs);
      }
    },
  });

  const writeTx = async (n: number): Promise<void> => {
    const client = await pool.connect();
    try {
      const ids = Array.from({ length: n }, () => randomUUID());
      await client.query('BEGIN');
      await client.query(ORDER, [ids, 'c-1', 'EUR', 2000, 'created']);
      const written = await writer.writeEvents(
        client,
        ids.map((orderId) => ({
          aggregateType: 'order',
          aggregateId: orderId,
          type: 'OrderCreated',
          payload: { orderId, customerId: 'c-1', currency: 'EUR', totalCents: 2000, lines: [{ sku: 'SKU-1', quantity: 2, priceCents: 1000 }], placedAt: new Date() },
        })),
      );
      await client.query('COMMIT');
      const at = Date.now();
      writerXacts++;
      for (const e of written) commitAt.set(e.id, at);
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  };

  const handledOf = (ids: readonly string[]) => ids.reduce((n, id) => n + (handledAt.has(id) ? 1 : 0), 0);
  const waitHandled = async (ids: () => string[], label: string, timeoutMs: number): Promise<number> => {
    const bar = progress.phase(label, ids().length, 'handled');
    const deadline = Date.now() + timeoutMs;
    let done = handledOf(ids());
    while (done < ids().length && Date.now() < deadline) {
      bar.update(done);
      await sleep(100);
      done = handledOf(ids());
    }
    bar.update(done);
    bar.done();
    return done;
  };

  /**
   * Writes at `rate` events/s (one event per transaction) for `seconds`; returns the ids committed, and
   * the load (CPU, database, relay statements) over the steady middle of the run: 20% to 90% of it.
   */
  const paced = async (rate: number, seconds: number, label: string) => {
    const before = new Set(commitAt.keys());
    const total = Math.round(rate * seconds);
    const bar = progress.phase(label, total, 'committed');
    const inFlight = new Set<Promise<void>>();
    let started = 0;
    let failed: Error | undefined;
    const t0 = Date.now();
    let window: { load: Promise<LoadWindow>; x0: number; q0?: number } | undefined;
    let measured: { load: Load; writerXacts: number; relayQueries?: number } | undefined;
    const closeWindow = async () => {
      if (!window || measured) return;
      const load = await (await window.load).end();
      const q1 = options.relayQueries?.();
      measured = { load, writerXacts: writerXacts - window.x0, ...(q1 !== undefined && window.q0 !== undefined ? { relayQueries: q1 - window.q0 } : {}) };
    };
    const end = t0 + seconds * 1000;
    // At most a pool's worth of transactions at once: a machine that cannot commit `rate` falls behind
    // (committedPerSec says so) instead of queueing connection requests until they time out.
    while (started < total && !failed && Date.now() < end) {
      const elapsed = (Date.now() - t0) / (seconds * 1000);
      if (!window && elapsed >= 0.2) window = { load: startLoad(options.admin, options.config.database.database), x0: writerXacts, q0: options.relayQueries?.() };
      if (window && !measured && elapsed >= 0.9) await closeWindow();
      const due = Math.min(total, Math.floor(((Date.now() - t0) / 1000) * rate) + 1);
      while (started < due && inFlight.size < MAX_IN_FLIGHT) {
        started++;
        const p: Promise<void> = writeTx(1)
          .catch((e: Error) => {
            failed = e;
          })
          .finally(() => inFlight.delete(p));
        inFlight.add(p);
      }
      bar.update(commitAt.size - before.size, { handled: handledAt.size });
      await sleep(2);
    }
    if (!window) window = { load: startLoad(options.admin, options.config.database.database), x0: writerXacts, q0: options.relayQueries?.() };
    await closeWindow();
    await Promise.all(inFlight);
    if (failed) throw failed;
    bar.update(commitAt.size - before.size);
    bar.done();
    const elapsed = (Date.now() - t0) / 1000;
    return { ids: [...commitAt.keys()].filter((id) => !before.has(id)), seconds: elapsed, ...(measured as NonNullable<typeof measured>) };
  };

  await router.start();
  try {
    // Warm-up (not measured): registry lookups, JIT, the router's group join, the connector's first batch.
    const warm = await paced(100, 2, `${options.pipeline} warm-up`);
    await waitHandled(() => warm.ids, `${options.pipeline} warm-up`, 60_000);

    const fixed: RateRun[] = [];
    for (const rate of options.rates) {
      const run = await paced(rate, options.seconds, `${options.pipeline} @${rate}/s`);
      const { load } = run;
      const handled = await waitHandled(() => run.ids, `${options.pipeline} @${rate}/s drain`, 30_000);
      const toHandled: number[] = [];
      const toKafka: number[] = [];
      const kafkaToHandled: number[] = [];
      for (const id of run.ids) {
        const c = commitAt.get(id) as number;
        const h = handledAt.get(id);
        const k = kafkaAt.get(id);
        if (h !== undefined) toHandled.push(h - c);
        if (k !== undefined) toKafka.push(k - c);
        if (h !== undefined && k !== undefined) kafkaToHandled.push(h - k);
      }
      const r: RateRun = {
        rate,
        seconds: round(run.seconds, 2),
        committed: run.ids.length,
        committedPerSec: round(run.ids.length / run.seconds),
        handled,
        missing: run.ids.length - handled,
        commitToHandledMs: roundAll({ ...percentiles(toHandled), max: toHandled.length ? toHandled.reduce((a, b) => Math.max(a, b), 0) : Number.NaN }),
        commitToKafkaMs: roundAll(percentiles(toKafka)),
        kafkaToHandledMs: roundAll(percentiles(kafkaToHandled)),
        routerTransactionMs: roundAll(percentiles(run.ids.flatMap((id) => transactionMs.get(id) ?? []), [50, 99])),
        writerXactPerSec: round(run.writerXacts / load.seconds),
        load,
      };
      if (run.relayQueries !== undefined) r.relayStatementsPerSec = round(run.relayQueries / load.seconds);
      progress.note(`${options.pipeline} @${rate}/s: commit -> handled p50 ${r.commitToHandledMs.p50} ms, p99 ${r.commitToHandledMs.p99} ms (${r.handled}/${r.committed} handled)`);
      fixed.push(r);
    }

    const sustained = options.sustainedSeconds > 0 ? await sustain() : undefined;
    return { pipeline: options.pipeline, fixed, ...(sustained ? { sustained } : {}) };
  } finally {
    await router.stop();
  }

  /** As many concurrent writers as asked, each writing as fast as it can; the handled rate is read once steady. */
  async function sustain(): Promise<SustainedRun> {
    const seconds = options.sustainedSeconds;
    const before = new Set(commitAt.keys());
    const mine = () => [...commitAt.keys()].filter((id) => !before.has(id));
    const counts = () => {
      let committed = 0;
      let handled = 0;
      for (const id of commitAt.keys()) {
        if (before.has(id)) continue;
        committed++;
        if (handledAt.has(id)) handled++;
      }
      return { committed, handled, at: Date.now() };
    };
    const bar = progress.phase(`${options.pipeline} sustained`, seconds, 's');
    const t0 = Date.now();
    const deadline = t0 + seconds * 1000;
    let mid: { committed: number; handled: number; at: number } | undefined;
    let midLoad: Promise<Awaited<ReturnType<typeof startLoad>>> | undefined;
    let x0 = 0;
    let q0: number | undefined;
    const worker = async () => {
      while (Date.now() < deadline) await writeTx(options.eventsPerTransaction);
    };
    let late: { committed: number; handled: number; at: number; load: Load; writerXacts: number; relayQueries?: number } | undefined;
    const ticker = (async () => {
      while (Date.now() < deadline) {
        await sleep(250);
        const c = counts();
        if (mid && midLoad && !late && c.at - t0 >= seconds * 1000 * 0.95) {
          // Ends inside steady load, as it began: see startLoad on pg_stat_database's flush delay.
          const load = await (await midLoad).end();
          const q = options.relayQueries?.();
          late = { ...c, load, writerXacts: writerXacts - x0, ...(q !== undefined && q0 !== undefined ? { relayQueries: q - q0 } : {}) };
        }
        if (!mid && c.at - t0 >= (seconds * 1000) / 2) {
          mid = c;
          x0 = writerXacts;
          q0 = options.relayQueries?.();
          midLoad = startLoad(options.admin, options.config.database.database);
        }
        bar.update(Math.min(seconds, Math.round((c.at - t0) / 1000)), { committed: c.committed, handled: c.handled });
      }
    })();
    await Promise.all([...Array.from({ length: options.writers }, worker), ticker]);
    const finished = counts();
    if (!late) {
      const load = await (await (midLoad ?? startLoad())).end();
      const q = options.relayQueries?.();
      late = { ...finished, load, writerXacts: writerXacts - x0, ...(q !== undefined && q0 !== undefined ? { relayQueries: q - q0 } : {}) };
    }
    const end = late;
    const { load } = late;
    bar.done();
    const start = mid ?? { committed: 0, handled: 0, at: t0 };
    const window = Math.max(0.001, (end.at - start.at) / 1000);
    const backlogStart = start.committed - start.handled;
    const backlogEnd = end.committed - end.handled;
    const committedInWindow = end.committed - start.committed;

    const ids = mine();
    const handled = await waitHandled(() => ids, `${options.pipeline} sustained drain`, 120_000);
    const inWindow = ids.filter((id) => {
      const c = commitAt.get(id) as number;
      return c >= start.at && c <= end.at;
    });
    const toKafka = inWindow.flatMap((id) => (kafkaAt.has(id) ? [(kafkaAt.get(id) as number) - (commitAt.get(id) as number)] : []));
    const kafkaToHandled = inWindow.flatMap((id) => (kafkaAt.has(id) && handledAt.has(id) ? [(handledAt.get(id) as number) - (kafkaAt.get(id) as number)] : []));
    const lastHandled = ids.reduce((m, id) => Math.max(m, handledAt.get(id) ?? 0), end.at);
    const drainSeconds = (lastHandled - finished.at) / 1000;
    const overallSeconds = (lastHandled - t0) / 1000;
    const run: SustainedRun = {
      seconds: round((finished.at - t0) / 1000, 2),
      writers: options.writers,
      eventsPerTransaction: options.eventsPerTransaction,
      committed: ids.length,
      handled,
      steady: {
        seconds: round(window, 2),
        committedPerSec: round(committedInWindow / window),
        handledPerSec: round((end.handled - start.handled) / window),
        backlogStart,
        backlogEnd,
        // Growth beyond a tenth of what was written in the window: the pipeline did not keep up.
        backlogGrew: backlogEnd - backlogStart > Math.max(100, 0.1 * committedInWindow),
        commitToKafkaP50Ms: round(percentiles(toKafka, [50]).p50 ?? Number.NaN),
        kafkaToHandledP50Ms: round(percentiles(kafkaToHandled, [50]).p50 ?? Number.NaN),
      },
      overall: {
        seconds: round(overallSeconds, 2),
        handledPerSec: round(handled / Math.max(0.001, overallSeconds)),
        drainSeconds: round(Math.max(0, drainSeconds), 2),
        drainPerSec: drainSeconds > 0.5 ? round((handled - finished.handled) / drainSeconds) : Number.NaN,
        missing: ids.length - handled,
      },
      writerXactPerSec: round(late.writerXacts / load.seconds),
      load,
    };
    if (late.relayQueries !== undefined) run.relayStatementsPerSec = round(late.relayQueries / load.seconds);
    progress.note(
      `${options.pipeline} sustained: ${run.steady.handledPerSec} handled/s steady (${run.steady.committedPerSec} committed/s; backlog ${backlogStart} -> ${backlogEnd}); drained in ${run.overall.drainSeconds} s`,
    );
    return run;
  }
}

function roundAll(r: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(r).map(([k, v]) => [k, Number.isFinite(v) ? round(v) : Number.NaN]));
}
