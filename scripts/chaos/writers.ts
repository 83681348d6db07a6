import type { Pool } from 'pg';
import type { OutboxWriter } from 'outbox-router/producer';
import { sleep } from 'outbox-router/retry';
import type { ChaosProfile } from './types';

/** The chaos run's writers: disjoint aggregates, rolled-back transactions, ambiguous commits resolved. */

export interface WriteState {
  attempted: number;
  /** event id → commit time (ms) */
  committed: Map<string, number>;
  rolledBack: Set<string>;
  /** Failed before COMMIT was sent (a fault): never committed. */
  failed: Set<string>;
  ambiguous: number;
  done: boolean;
  /** Set by the fault loop once every fault has been injected and recovered from, and the planned events written. */
  stopWriting: boolean;
}

export function newWriteState(_profile: ChaosProfile): WriteState {
  return { attempted: 0, committed: new Map(), rolledBack: new Set(), failed: new Set(), ambiguous: 0, done: false, stopWriting: false };
}

/**
 * Writers own disjoint aggregates, so an aggregate's commit order is its `seq` order. A transaction
 * rolled back on purpose uses the next seq but does not consume it. A COMMIT whose outcome is unknown
 * (the connection died during it) is resolved by looking for the outbox row once the database is back.
 */
export async function writeEvents(pool: Pool, writer: OutboxWriter, profile: ChaosProfile, state: WriteState): Promise<void> {
  const aggregates = Array.from({ length: profile.aggregates }, (_, i) => `agg-${String(i).padStart(4, '0')}`);
  const nextSeq = new Map(aggregates.map((a) => [a, 1]));
  const intervalMs = (1000 * profile.writers) / profile.rate;
  let slot = 0;
  // Writes go on until the fault loop is done (at least profile.events): every fault meets live traffic.
  const take = () => (state.stopWriting ? undefined : slot++);
  const writerLoop = async (w: number) => {
    const mine = aggregates.filter((_, i) => i % profile.writers === w);
    let turn = 0;
    let nextAt = Date.now();
    for (let n = take(); n !== undefined; n = take()) {
      nextAt += intervalMs;
      const wait = nextAt - Date.now();
      if (wait > 0) await sleep(wait);
      const aggregate = mine[turn++ % mine.length] as string;
      const seq = nextSeq.get(aggregate) as number;
      const rollback = (n * 7919) % 100 < profile.rollbackShare * 100;
      state.attempted++;
      const outcome = await oneTransaction(pool, writer, aggregate, seq, rollback);
      if (outcome.kind === 'committed') {
        state.committed.set(outcome.id, outcome.at);
        nextSeq.set(aggregate, seq + 1);
      } else if (outcome.kind === 'rolled-back') {
        state.rolledBack.add(outcome.id);
      } else if (outcome.kind === 'failed') {
        state.failed.add(outcome.id);
      } else {
        state.ambiguous++;
        const committed = await resolveAmbiguous(pool, outcome.id);
        if (committed) {
          state.committed.set(outcome.id, outcome.at);
          nextSeq.set(aggregate, seq + 1);
        } else {
          state.failed.add(outcome.id);
        }
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: profile.writers }, (_, w) => writerLoop(w)));
  } finally {
    state.done = true;
  }
}

type TxOutcome = { kind: 'committed' | 'rolled-back' | 'failed' | 'ambiguous'; id: string; at: number };

async function oneTransaction(pool: Pool, writer: OutboxWriter, aggregate: string, seq: number, rollback: boolean): Promise<TxOutcome> {
  for (;;) {
    let client;
    try {
      client = await pool.connect();
    } catch {
      await sleep(200); // the database is down: wait, nothing was attempted
      continue;
    }
    let id = '';
    let commitSent = false;
    try {
      await client.query('BEGIN');
      await client.query('INSERT INTO chaos_business (aggregate_id, seq) VALUES ($1, $2)', [aggregate, seq]);
      const written = await writer.writeEvent(client, {
        aggregateType: 'order',
        aggregateId: aggregate,
        type: 'OrderCreated',
        headers: { seq: String(seq) },
        payload: { orderId: aggregate, customerId: 'chaos', currency: 'EUR', totalCents: seq, lines: [], placedAt: new Date() },
      });
      id = written.id;
      if (rollback) {
        await client.query('ROLLBACK');
        client.release();
        return { kind: 'rolled-back', id, at: Date.now() };
      }
      commitSent = true;
      await client.query('COMMIT');
      client.release();
      return { kind: 'committed', id, at: Date.now() };
    } catch (error) {
      client.release(error as Error);
      if (!id) {
        await sleep(200); // failed before the event existed: try the same seq again
        continue;
      }
      return { kind: commitSent ? 'ambiguous' : 'failed', id, at: Date.now() };
    }
  }
}

async function resolveAmbiguous(pool: Pool, id: string): Promise<boolean> {
  for (;;) {
    try {
      const { rowCount } = await pool.query('SELECT 1 FROM outbox WHERE id = $1', [id]);
      return (rowCount ?? 0) > 0;
    } catch {
      await sleep(500);
    }
  }
}

/** Until an event committed after `since` has been handled. */
