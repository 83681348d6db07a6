import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Pool } from 'pg';
import type { ReplayReport } from 'outbox-router/router';
import { sleep } from 'outbox-router/retry';
import { PROJECT_ROOT } from '../stack/paths';
import { behindPoison, type WriteState } from './writers';

/**
 * The chaos run's handler, and how the run fixes its failures: an event marked `fail: flaky` throws on
 * its first two attempts in a router process (the router retries it); one marked `fail: poison` throws
 * until its id is in chaos_fixed (dead-lettered after the router's attempts, its key parked with the
 * events behind it), then `outbox dlq:replay` applies them in order.
 */
export const HANDLERS_JS = `const attempts = new Map();
module.exports = { order: { OrderCreated: async (event, { tx }) => {
  const fail = event.headers.fail;
  if (fail === 'flaky') {
    const n = (attempts.get(event.id) || 0) + 1;
    attempts.set(event.id, n);
    if (n <= 2) throw new Error('chaos: flaky handler, attempt ' + n);
  } else if (fail === 'poison') {
    const fixed = await tx.query('SELECT 1 FROM chaos_fixed WHERE event_id = $1', [event.id]);
    if (fixed.rowCount === 0) throw new Error('chaos: poison event ' + event.id + ', not fixed yet');
  }
  await tx.query('INSERT INTO chaos_effects (event_id, aggregate_id, seq) VALUES ($1, $2, $3)', [event.id, event.aggregateId, Number(event.headers.seq)]);
} } };\n`;

/** The router settings the failures need: quick retries, so a poison event is dead-lettered in about 2 s. */
export const ROUTER_FAILURE_SETTINGS = { maxAttempts: 5, backoff: { initialDelayMs: 100, maxDelayMs: 1_000 } };

export interface ReplayOutcome {
  fixed: number;
  replayed: number;
  /** Replayed events that reached the router before their key's head and were sent again. */
  resent: number;
  /** Each key the replay left parked, with why: "key (reason: event error; n parked)". */
  stillParked: string[];
  error?: string;
}

/**
 * Fixes the committed poison events older than `olderThanMs` (rows in chaos_fixed), then runs
 * `outbox dlq:replay` as an operator would: the outstanding dead letters of the run's consumer, in
 * order, following their keys until released.
 */
export async function fixAndReplay(
  pool: Pool,
  state: WriteState,
  { configFile, consumer, env, olderThanMs, followMs }: { configFile: string; consumer: string; env: Record<string, string>; olderThanMs: number; followMs: number },
): Promise<ReplayOutcome> {
  const before = Date.now() - olderThanMs;
  const ids = [...state.committed.entries()].filter(([, e]) => e.fail === 'poison' && e.at <= before).map(([id]) => id);
  await pool.query('INSERT INTO chaos_fixed (event_id) SELECT unnest($1::uuid[]) ON CONFLICT DO NOTHING', [ids]);
  const args = [join(PROJECT_ROOT, 'dist/cli/main.js'), '--log-format', 'json', '--log-level', 'warn', 'dlq:replay', '-c', configFile, '--aggregate-type', 'order', '--consumer', consumer, '--follow-ms', String(followMs), '--json'];
  try {
    const { stdout } = await promisify(execFile)(process.execPath, args, { env: { ...process.env, ...env }, maxBuffer: 256 * 2 ** 20 });
    // JSON lines: one per replayed record, the report last.
    const report = JSON.parse(stdout.trimEnd().split('\n').at(-1) ?? '{}') as Pick<ReplayReport, 'replayed' | 'resent' | 'stillParkedDetail'>;
    // "key (reason: event, error; parked rows)": why the replay left it parked (ReplayReport.stillParkedDetail).
    const stillParked = report.stillParkedDetail.map((k) => `${k.key} (${k.reason}${k.eventId ? `: ${k.eventId} ${k.errorCode ?? ''}`.trimEnd() : ''}; ${k.parkedRows} parked)`);
    return { fixed: ids.length, replayed: report.replayed, resent: report.resent, stillParked };
  } catch (error) {
    const e = error as Error & { stderr?: string };
    return { fixed: ids.length, replayed: 0, resent: 0, stillParked: [], error: `${e.message.split('\n')[0]} ${(e.stderr ?? '').trim().slice(-300)}` };
  }
}

/** This consumer's parked rows, and whether every one of `poisonIds` (poison events, or any ids) is among them or applied. */
export async function parkedState(pool: Pool, consumer: string, poisonIds: readonly string[]): Promise<{ parkedRows: number; poisonSettled: boolean }> {
  const { rows } = await pool.query<{ parked: number; unsettled: number }>(
    `SELECT (SELECT count(*) FROM inbox_parked WHERE consumer = $1)::int AS parked,
            (SELECT count(*) FROM unnest($2::text[]) AS p(id)
              WHERE NOT EXISTS (SELECT 1 FROM inbox_parked WHERE consumer = $1 AND event_id = p.id)
                AND NOT EXISTS (SELECT 1 FROM chaos_effects WHERE event_id = p.id::uuid))::int AS unsettled`,
    [consumer, poisonIds],
  );
  return { parkedRows: rows[0]?.parked ?? 0, poisonSettled: (rows[0]?.unsettled ?? 1) === 0 };
}

/**
 * Until every event behind a poison event (the poison included) is dead-lettered (parked) or applied,
 * for at most `timeoutMs`: so the replay at the end starts once the pipeline has delivered them all, and
 * a key it leaves parked is the replay's doing, not events still on their way.
 */
export async function waitParkedSettled(pool: Pool, consumer: string, state: WriteState, timeoutMs: number): Promise<boolean> {
  const ids = [...state.committed.entries()].filter(([, e]) => behindPoison(state, e)).map(([id]) => id);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await parkedState(pool, consumer, ids).then((s) => s.poisonSettled).catch(() => false);
    if (ok || Date.now() > deadline) return ok;
    await sleep(1_000);
  }
}
