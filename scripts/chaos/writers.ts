import type { Pool, PoolClient } from 'pg';
import type { OutboxWriter } from 'outbox-router/producer';
import { sleep } from 'outbox-router/retry';
import type { ChaosProfile } from './types';

/**
 * The chaos run's writers: concurrent transactions on shared aggregates, some rolled back on purpose,
 * ambiguous commits resolved, some events marked to make their handler fail.
 */

/** What the handler does with an event (the `fail` header). */
export type FailMark = 'flaky' | 'poison' | undefined;

export interface CommittedEvent {
  /** Commit time (ms). */
  at: number;
  /** When its transaction began (ms). */
  began: number;
  aggregate: string;
  /** The aggregate's commit order (1, 2, …): its business row's counter, taken under its row lock. */
  seq: number;
  fail: FailMark;
}

export interface WriteState {
  attempted: number;
  committed: Map<string, CommittedEvent>;
  rolledBack: Set<string>;
  /** Failed before COMMIT was sent (a fault): never committed. */
  failed: Set<string>;
  ambiguous: number;
  /** aggregate → seq of its first committed poison event: from there on its events are parked until the run fixes the poison. */
  parkedFrom: Map<string, number>;
  done: boolean;
  /** Set by the fault loop once every fault has been injected and recovered from, and the planned events written. */
  stopWriting: boolean;
}

export function newWriteState(): WriteState {
  return { attempted: 0, committed: new Map(), rolledBack: new Set(), failed: new Set(), ambiguous: 0, parkedFrom: new Map(), done: false, stopWriting: false };
}

/** Is this committed event behind (or at) a poison event of its aggregate, so parked until the fix? */
export function behindPoison(state: WriteState, event: CommittedEvent): boolean {
  const from = state.parkedFrom.get(event.aggregate);
  return from !== undefined && event.seq >= from;
}

/**
 * Committed transactions that began before the one committed just ahead of them on the same aggregate:
 * how often start order and commit order differ (the writers make them differ on purpose). Pure.
 */
export function commitOrderInversions(committed: Iterable<CommittedEvent>): number {
  const byAggregate = new Map<string, CommittedEvent[]>();
  for (const e of committed) {
    const list = byAggregate.get(e.aggregate);
    if (list) list.push(e);
    else byAggregate.set(e.aggregate, [e]);
  }
  let inversions = 0;
  for (const events of byAggregate.values()) {
    events.sort((a, b) => a.seq - b.seq);
    for (let i = 1; i < events.length; i++) if ((events[i] as CommittedEvent).began < (events[i - 1] as CommittedEvent).began) inversions++;
  }
  return inversions;
}

export function aggregateIds(profile: Pick<ChaosProfile, 'aggregates'>): string[] {
  return Array.from({ length: profile.aggregates }, (_, i) => `agg-${String(i).padStart(4, '0')}`);
}

/** Transaction `n`'s plan, from a seeded generator so a run can be repeated. Pure. */
export interface TxPlan {
  aggregate: string;
  rollback: boolean;
  fail: FailMark;
  lockDelayMs: number;
  commitDelayMs: number;
}

/** A small deterministic generator (mulberry32): the plan of transaction n depends on n only. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Which aggregate transaction `n` writes (a `hotShare` of them one of the first `hotAggregates`, so
 * writers meet on the same row locks), whether it is rolled back, whether its handler is made to fail,
 * and its random delays. Poison events are never on a hot aggregate (that would park a large share of
 * the traffic) and never rolled back (a fix for an event that does not exist proves nothing).
 */
export function planTransaction(n: number, profile: ChaosProfile, aggregates: readonly string[]): TxPlan {
  const r = random(n * 2654435761 + 1);
  const hot = Math.min(profile.hotAggregates, aggregates.length);
  const onHot = hot > 0 && r() < profile.hotShare;
  const index = onHot ? Math.floor(r() * hot) : hot + Math.floor(r() * (aggregates.length - hot));
  const poison = !onHot && profile.poisonEvery > 0 && n % profile.poisonEvery === profile.poisonEvery - 1;
  const rollback = !poison && r() < profile.rollbackShare;
  const fail: FailMark = poison ? 'poison' : r() < profile.flakyShare ? 'flaky' : undefined;
  return { aggregate: aggregates[index] as string, rollback, fail, lockDelayMs: Math.floor(r() * profile.maxDelayMs), commitDelayMs: Math.floor(r() * profile.maxDelayMs) };
}

/**
 * Writers share the aggregates. Each transaction begins, does other work (a row in chaos_work), waits a
 * random time, then takes its aggregate's row lock (`UPDATE chaos_business … RETURNING seq`), writes its
 * event (after the lock, so the outbox `seq` follows it too: the relay's order), waits again and commits.
 * So transactions start in one order and commit in another, while an aggregate's `seq` is its commit
 * order: a transaction rolled back (on purpose or by a fault) releases the lock and its increment.
 * A COMMIT whose outcome is unknown (the connection died during it) is resolved by looking for the
 * outbox row once the database is back.
 */
export async function writeEvents(pool: Pool, writer: OutboxWriter, profile: ChaosProfile, state: WriteState): Promise<void> {
  const aggregates = aggregateIds(profile);
  const intervalMs = (1000 * profile.writers) / profile.rate;
  let slot = 0;
  // Writes go on until the fault loop is done (at least profile.events): every fault meets live traffic.
  const take = () => (state.stopWriting ? undefined : slot++);
  const writerLoop = async (w: number) => {
    let nextAt = Date.now() + (w * intervalMs) / profile.writers;
    for (let n = take(); n !== undefined; n = take()) {
      nextAt += intervalMs;
      const wait = nextAt - Date.now();
      if (wait > 0) await sleep(wait);
      else if (wait < -5_000) nextAt = Date.now(); // after an outage: no burst to catch up
      const plan = planTransaction(n, profile, aggregates);
      state.attempted++;
      const outcome = await oneTransaction(pool, writer, plan, w);
      if (outcome.kind === 'rolled-back') {
        state.rolledBack.add(outcome.id);
      } else if (outcome.kind === 'failed') {
        state.failed.add(outcome.id);
      } else if (outcome.kind === 'committed' || (await resolveAmbiguous(pool, outcome.id, state))) {
        state.committed.set(outcome.id, { at: outcome.at, began: outcome.began, aggregate: plan.aggregate, seq: outcome.seq, fail: plan.fail });
        if (plan.fail === 'poison' && !state.parkedFrom.has(plan.aggregate)) state.parkedFrom.set(plan.aggregate, outcome.seq);
      } else {
        state.failed.add(outcome.id);
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: profile.writers }, (_, w) => writerLoop(w)));
  } finally {
    state.done = true;
  }
}

type TxOutcome = { kind: 'committed' | 'rolled-back' | 'failed' | 'ambiguous'; id: string; began: number; at: number; seq: number };

async function oneTransaction(pool: Pool, writer: OutboxWriter, plan: TxPlan, w: number): Promise<TxOutcome> {
  for (;;) {
    let client: PoolClient;
    try {
      client = await pool.connect();
    } catch {
      await sleep(200); // the database is down: wait, nothing was attempted
      continue;
    }
    let id = '';
    let seq = 0;
    let commitSent = false;
    const began = Date.now();
    try {
      await client.query('BEGIN');
      await client.query('INSERT INTO chaos_work (writer, aggregate_id) VALUES ($1, $2)', [w, plan.aggregate]);
      if (plan.lockDelayMs > 0) await sleep(plan.lockDelayMs);
      const { rows } = await client.query<{ seq: number }>('UPDATE chaos_business SET seq = seq + 1 WHERE aggregate_id = $1 RETURNING seq', [plan.aggregate]);
      seq = rows[0]?.seq as number;
      const written = await writer.writeEvent(client, {
        aggregateType: 'order',
        aggregateId: plan.aggregate,
        type: 'OrderCreated',
        headers: { seq: String(seq), ...(plan.fail ? { fail: plan.fail } : {}) },
        payload: { orderId: plan.aggregate, customerId: 'chaos', currency: 'EUR', totalCents: seq, lines: [], placedAt: new Date() },
      });
      id = written.id;
      if (plan.commitDelayMs > 0) await sleep(plan.commitDelayMs);
      if (plan.rollback) {
        await client.query('ROLLBACK');
        client.release();
        return { kind: 'rolled-back', id, began, at: Date.now(), seq };
      }
      commitSent = true;
      await client.query('COMMIT');
      client.release();
      return { kind: 'committed', id, began, at: Date.now(), seq };
    } catch (error) {
      client.release(error as Error);
      if (!id) {
        await sleep(200); // failed before the event existed: try again (the lock and its seq were rolled back)
        continue;
      }
      return { kind: commitSent ? 'ambiguous' : 'failed', id, began, at: Date.now(), seq };
    }
  }
}

/** Did an ambiguous COMMIT commit? Its outbox row says so, or, once a cleanup may have deleted the row (the soak profile), its effect. */
async function resolveAmbiguous(pool: Pool, id: string, state: WriteState): Promise<boolean> {
  state.ambiguous++;
  for (;;) {
    try {
      const { rows } = await pool.query<{ found: boolean }>(
        'SELECT EXISTS (SELECT 1 FROM outbox WHERE id = $1) OR EXISTS (SELECT 1 FROM chaos_effects WHERE event_id = $1) AS found',
        [id],
      );
      return rows[0]?.found === true;
    } catch {
      await sleep(500);
    }
  }
}
