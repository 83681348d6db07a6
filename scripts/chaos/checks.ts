import type { Pool } from 'pg';
import type { OutboxConfig } from 'outbox-router/config';
import { createKafka } from 'outbox-router/kafka';
import { sleep } from 'outbox-router/retry';
import { percentiles, round } from '../bench/stats';
import type { WriteState } from './writers';

/** What the chaos run checks afterwards, from the database and the topic, and how it times recovery. */

export async function measureRecovery(pool: Pool, state: WriteState, since: number, timeoutMs: number): Promise<number | null> {
  const deadline = since + timeoutMs;
  while (Date.now() < deadline) {
    const after = [...state.committed.entries()].filter(([, at]) => at > since).map(([id]) => id);
    if (after.length > 0) {
      try {
        const { rows } = await pool.query<{ at: string }>(
          'SELECT (extract(epoch FROM min(handled_at)) * 1000)::float8 AS at FROM chaos_effects WHERE event_id = ANY($1::uuid[])',
          [after.slice(0, 5_000)],
        );
        if (rows[0]?.at) return Math.max(0, Math.round(Number(rows[0].at) - since));
      } catch {
        // the database is restarting
      }
    } else if (state.done) {
      return 0; // nothing was committed after the fault: nothing to recover
    }
    await sleep(250);
  }
  return null;
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

/** Reads the whole topic: records, distinct ids, anything of a rolled-back or failed transaction, anything missing. */
export async function scanTopic(config: OutboxConfig, topic: string, state: WriteState): Promise<{ records: number; distinct: number; phantomOnTopic: number; missingOnTopic: number }> {
  const kafka = createKafka(config, { role: 'chaos-scan' });
  const admin = kafka.admin();
  await admin.connect();
  const ends = new Map((await admin.fetchTopicOffsets(topic)).map((o) => [o.partition, BigInt(o.high)]));
  await admin.disconnect();
  const ids: string[] = [];
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
          for (const m of batch.messages) ids.push(String(m.headers?.id ?? ''));
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
  const distinct = new Set(ids);
  const phantomOnTopic = [...distinct].filter((id) => state.rolledBack.has(id) || state.failed.has(id) || !state.committed.has(id)).length;
  const missingOnTopic = [...state.committed.keys()].filter((id) => !distinct.has(id)).length;
  return { records: ids.length, distinct: distinct.size, phantomOnTopic, missingOnTopic };
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
  const latencies = rows.filter((r) => state.committed.has(r.event_id)).map((r) => Math.max(0, Number(r.at) - (state.committed.get(r.event_id) as number)));
  return Object.fromEntries(Object.entries(percentiles(latencies, [50, 99])).map(([k, v]) => [k, round(v, 1)]));
}

/** The process supervisor's part: start what was stopped (a few tries: a killed JVM may hold its port a moment). */
