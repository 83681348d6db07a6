import type { Pool } from 'pg';
import type { OutboxConfig } from 'outbox-router/config';
import { createKafka } from 'outbox-router/kafka';
import { sleep } from 'outbox-router/retry';
import { percentiles, round } from '../bench/stats';
import { behindPoison, type WriteState } from './writers';

/** What the chaos run checks afterwards, from the database and the topic, and how it times recovery. */

/** Events committed this long before a fault and not handled yet were caught by it: recovery waits for them too. */
export const RECOVERY_WINDOW_BEFORE_MS = 3_000;
/** After the fault, the first event of this many distinct aggregates must be handled: every partition flows again. */
export const RECOVERY_AGGREGATES_AFTER = 20;

/** The first committed event after `since` of each of the first `count` distinct aggregates (not behind a poison event). Pure. */
export function firstAfter(state: WriteState, since: number, count: number): string[] {
  const after = [...state.committed.entries()].filter(([, e]) => e.at > since && !behindPoison(state, e)).sort(([, a], [, b]) => a.at - b.at);
  const seen = new Set<string>();
  const ids: string[] = [];
  for (const [id, e] of after) {
    if (seen.has(e.aggregate)) continue;
    seen.add(e.aggregate);
    ids.push(id);
    if (ids.length >= count) break;
  }
  return ids;
}

/**
 * Recovery from a fault injected at `since`: until every event committed in the 3 s before it (those
 * in flight when it hit) and the first event after it of 20 distinct aggregates are handled. With two
 * routers, the survivor's partitions flow on while the killed one's wait for the rebalance: 20
 * aggregates cover every partition, so this waits for them even at a low rate, when nothing was in
 * flight at the kill. Events of parked keys (behind a poison event) are left out: they wait for the DLQ
 * replay.
 */
export async function measureRecovery(pool: Pool, state: WriteState, since: number, timeoutMs: number): Promise<number | null> {
  const deadline = since + timeoutMs;
  const inFlight = [...state.committed.entries()].filter(([, e]) => e.at > since - RECOVERY_WINDOW_BEFORE_MS && e.at <= since && !behindPoison(state, e)).map(([id]) => id);
  while (Date.now() < deadline) {
    const after = firstAfter(state, since, RECOVERY_AGGREGATES_AFTER);
    if (after.length >= RECOVERY_AGGREGATES_AFTER || state.done) {
      try {
        const [before, next] = await Promise.all([handledTimes(pool, inFlight), handledTimes(pool, after)]);
        if (before.count === inFlight.length && next.count === after.length) {
          return Math.max(0, Math.round(Math.max(before.last ?? 0, next.last ?? 0) - since));
        }
      } catch {
        // the database is restarting
      }
    }
    await sleep(250);
  }
  return null;
}

/** How many of `ids` were handled, the first and the last handled time (ms). */
async function handledTimes(pool: Pool, ids: readonly string[]): Promise<{ count: number; first: number | null; last: number | null }> {
  if (ids.length === 0) return { count: 0, first: null, last: null };
  const { rows } = await pool.query<{ n: number; first: number | null; last: number | null }>(
    `SELECT count(DISTINCT event_id)::int AS n, (extract(epoch FROM min(handled_at)) * 1000)::float8 AS first, (extract(epoch FROM max(handled_at)) * 1000)::float8 AS last
       FROM chaos_effects WHERE event_id = ANY($1::uuid[])`,
    [ids],
  );
  const r = rows[0];
  return { count: r?.n ?? 0, first: r?.first == null ? null : Number(r.first), last: r?.last == null ? null : Number(r.last) };
}

export async function countHandled(pool: Pool): Promise<number> {
  try {
    return Number((await pool.query<{ n: string }>('SELECT count(DISTINCT event_id) AS n FROM chaos_effects')).rows[0]?.n ?? 0);
  } catch {
    return 0;
  }
}

export async function verify(pool: Pool, state: WriteState): Promise<{ lost: number; phantom: number; doubleApplied: number; orderViolations: number }> {
  const { rows } = await pool.query<{ event_id: string; aggregate_id: string; seq: number }>('SELECT event_id, aggregate_id, seq FROM chaos_effects ORDER BY n');
  const counts = new Map<string, number>();
  for (const r of rows) counts.set(r.event_id, (counts.get(r.event_id) ?? 0) + 1);
  const lost = [...state.committed.keys()].filter((id) => !counts.has(id)).length;
  const phantom = [...counts.keys()].filter((id) => !state.committed.has(id)).length;
  const doubleApplied = [...counts.values()].filter((n) => n > 1).length;
  const lastSeq = new Map<string, number>();
  let orderViolations = 0;
  for (const r of rows) {
    const prev = lastSeq.get(r.aggregate_id) ?? 0;
    if (r.seq <= prev) orderViolations++;
    lastSeq.set(r.aggregate_id, r.seq);
  }
  return { lost, phantom, doubleApplied, orderViolations };
}

/**
 * Reads the whole topic: records, distinct ids, anything of a rolled-back or failed transaction, anything
 * missing. Records dlq:replay re-published (x-replayed-at) are counted apart: they are not duplicates.
 */
export async function scanTopic(
  config: OutboxConfig,
  topic: string,
  state: WriteState,
): Promise<{ records: number; distinct: number; duplicates: number; replayed: number; phantomOnTopic: number; missingOnTopic: number }> {
  const kafka = createKafka(config, { role: 'chaos-scan' });
  const admin = kafka.admin();
  await admin.connect();
  const ends = new Map((await admin.fetchTopicOffsets(topic)).map((o) => [o.partition, BigInt(o.high)]));
  await admin.disconnect();
  const ids: string[] = [];
  let replayed = 0;
  const remaining = new Set([...ends.entries()].filter(([, high]) => high > 0n).map(([p]) => p));
  // read_committed, as the router reads: records of an aborted Connect transaction (--exactly-once) are not
  // delivered, so they are not counted as duplicates. Under EOS the log ends with a commit marker, which no
  // record carries: the end is reached when a fetch's last offset (records and markers, END_BATCH_PROCESS,
  // also emitted for a fetch of markers only) reaches the high watermark.
  const consumer = kafka.consumer({ groupId: `${topic}-scan-${Date.now()}`, maxWaitTimeInMs: 100, readUncommitted: false });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await new Promise<void>((resolve, reject) => {
    if (remaining.size === 0) return resolve();
    const timer = setTimeout(() => reject(new Error(`chaos: reading ${topic} did not reach its end in 120 s`)), 120_000);
    consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
      if (BigInt(payload.lastOffset) >= (ends.get(payload.partition) ?? 0n) - 1n) remaining.delete(payload.partition);
      if (remaining.size === 0) {
        clearTimeout(timer);
        resolve();
      }
    });
    void consumer
      .run({
        eachBatch: async ({ batch }) => {
          for (const m of batch.messages) {
            if (m.headers?.['x-replayed-at'] !== undefined) replayed++;
            else ids.push(String(m.headers?.id ?? ''));
          }
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
  const distinct = new Set(ids);
  const duplicates = ids.length - distinct.size;
  // A replayed event is on the topic as it was first published, too: it adds no id of its own.
  const phantomOnTopic = [...distinct].filter((id) => state.rolledBack.has(id) || state.failed.has(id) || !state.committed.has(id)).length;
  const missingOnTopic = [...state.committed.keys()].filter((id) => !distinct.has(id)).length;
  return { records: ids.length + replayed, distinct: distinct.size, duplicates, replayed, phantomOnTopic, missingOnTopic };
}

/** Slot lag once the connector has caught up (the heartbeat confirms an idle slot every 10 s). */
export async function settledSlotLag(pool: Pool, slot: string): Promise<number | null> {
  let lag: number | null = null;
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const { rows } = await pool.query<{ lag: string | null }>(
      'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint AS lag FROM pg_replication_slots WHERE slot_name = $1',
      [slot],
    );
    lag = rows[0]?.lag == null ? null : Number(rows[0].lag);
    if (lag !== null && lag <= 16 * 2 ** 20) return lag;
    await sleep(1_000);
  }
  return lag;
}

export async function commitToHandled(pool: Pool, state: WriteState): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ event_id: string; at: number }>(
    'SELECT event_id, (extract(epoch FROM min(handled_at)) * 1000)::float8 AS at FROM chaos_effects GROUP BY event_id',
  );
  const latencies = rows.flatMap((r) => {
    const e = state.committed.get(r.event_id);
    // Events behind a poison event waited for the replay on purpose: not the pipeline's latency.
    return e && !behindPoison(state, e) ? [Math.max(0, Number(r.at) - e.at)] : [];
  });
  return Object.fromEntries(Object.entries(percentiles(latencies, [50, 99])).map(([k, v]) => [k, round(v, 1)]));
}

