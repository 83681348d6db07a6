import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { PoolClient } from 'pg';
import { qualified } from '../../src/db';
import { parkedTableName } from '../../src/provision/sql-files';
import { replayDeadLetters, type EventHandler, type Handlers } from '../../src/router';
import { pruneInbox } from '../../src/router/inbox-retention';
import { PROJECT_ROOT } from '../../scripts/stack/paths';
import { collect } from '../support/consume';
import { routerHarness, type Scenario } from '../support/router-scenario';
import { testKafka } from '../support/stack-env';

jest.setTimeout(180_000);

/**
 * A dead-letter topic is shared by every consumer of its aggregate type, and a replay goes back to the
 * topic all of them read: a replay must reach only the consumer it is for, take only that consumer's
 * dead letters, and judge its horizon by when an event was first dead-lettered. Also: dlq:release says
 * when a running router parked a released key again, and a replay streams its report.
 */
describe('dlq:replay and dlq:release with several consumers of one topic', () => {
  const h = routerHarness('router_replay_consumers');
  const { scenario, produce, startRouter, until } = h;
  const table = qualified('public', parkedTableName('inbox'));
  const day = 24 * 60 * 60 * 1000;

  /** Each applied event as a row of `effects` under `<run>/<consumer>`; `fail` throws after the write. */
  const recording = (s: Scenario, consumer: string, fail: (reason: string) => boolean = () => false): Handlers => {
    const apply: EventHandler = async (event, { tx }) => {
      await tx.query('INSERT INTO effects (run, message_id, aggregate_id, reason) VALUES ($1, $2, $3, $4)', [`${s.run}/${consumer}`, event.id, event.aggregateId, event.payload.reason]);
      if (fail(String(event.payload.reason))) throw new Error(`${String(event.payload.reason)} is broken for ${consumer}`);
    };
    return { order: { OrderCancelled: apply } };
  };
  const applied = async (s: Scenario, consumer: string) =>
    (await h.pool.query<{ reason: string }>('SELECT reason FROM effects WHERE run = $1 ORDER BY seq', [`${s.run}/${consumer}`])).rows.map((r) => r.reason);
  const parkedIds = async (consumer: string) => (await h.pool.query<{ event_id: string }>(`SELECT event_id FROM ${table} WHERE consumer = $1 ORDER BY seq`, [consumer])).rows.map((r) => r.event_id);

  it('a replay reaches only its consumer: another consumer of the topic whose inbox row was pruned does not apply the event again, and --all leaves its dead letters and parked key alone', async () => {
    const s = await scenario(1);
    const c1 = `c1-${s.run}`;
    const c2 = `c2-${s.run}`;
    let broken = true;
    // c1 fails `poison` (and parks k); c2 applies it, and parks k2 of its own (`c2-only` always fails there).
    const r1 = await startRouter(s, recording(s, c1, (reason) => broken && reason === 'poison'), { consumer: c1, maxAttempts: 1 });
    const r2 = await startRouter(s, recording(s, c2, (reason) => reason === 'c2-only'), { consumer: c2, maxAttempts: 1 });
    const [poison] = await produce(s, [{ key: 'k', reason: 'poison' }, { key: 'k', reason: 'after' }, { key: 'k2', reason: 'c2-only' }]);
    await until('c1 parked k, c2 applied it and parked k2', async () => [r1.stats(), r2.stats()], ([a, b]) => a?.deadLettered === 2 && a.applied === 1 && b?.applied === 2 && b.deadLettered === 1);
    expect(await applied(s, c2)).toEqual(['poison', 'after']);

    // k stays parked for c1 longer than c2 keeps its inbox rows (inbox retention): c2's rows are gone.
    const pruned = await pruneInbox(h.pool, { inboxTable: qualified('public', 'inbox'), parkedTable: table, consumer: c2, retentionMs: 0, batchSize: 1_000 });
    expect(pruned.deleted).toBe(2);

    broken = false;
    const report = await replayDeadLetters({ kafka: testKafka(), dlqTopic: s.dlq, outstanding: { pool: h.pool, parkedTable: table, consumer: c1, aggregateType: 'order' } });
    await until('c1 applied the replayed events', () => applied(s, c1), (reasons) => reasons.length === 3);
    await until('both replays reached c2 too', () => r2.stats(), (st) => st.received === 5);
    expect(await applied(s, c1)).toEqual(['c2-only', 'poison', 'after']); // the failed try's write was rolled back
    expect(await applied(s, c2)).toEqual(['poison', 'after']); // never again for c2
    expect(r2.stats()).toMatchObject({ skipped: 2, applied: 2 });
    expect(report).toMatchObject({ consumer: c1, replayed: 2, otherConsumer: 1, stillParked: [] });
    expect(await parkedIds(c1)).toEqual([]);
    const letters = await collect([s.dlq], (rs) => rs.length >= 3);
    expect(letters.map((l) => [l.headers.id, l.headers['x-consumer']]).filter(([id]) => id === poison?.id)).toEqual([[poison?.id, c1]]);

    // --all for c1: c1's letters (the inbox skips them), never c2's, whose key stays parked.
    const all = await replayDeadLetters({ kafka: testKafka(), dlqTopic: s.dlq, consumer: c1 });
    expect(all).toMatchObject({ replayed: 2, otherConsumer: 1 });
    await until('c1 counted both as duplicates, c2 skipped them', async () => [r1.stats(), r2.stats()], ([a, b]) => a?.duplicates === 2 && b?.skipped === 4);
    expect(await parkedIds(c2)).toHaveLength(1);
    expect(r2.stats()).toMatchObject({ applied: 2, deadLettered: 1 });
    expect(await applied(s, c2)).toEqual(['poison', 'after']);
  });

  it('--all measures its horizon from when an event was first dead-lettered, kept when it is dead-lettered again', async () => {
    const s = await scenario(1);
    const consumer = `c-${s.run}`;
    const r = await startRouter(s, recording(s, consumer, (reason) => reason === 'e1'), { consumer, maxAttempts: 1 });
    const [, e2] = await produce(s, [{ key: 'k', reason: 'e1' }, { key: 'k', reason: 'e2' }]);
    await until('both dead-lettered', () => r.stats(), (st) => st.deadLettered === 2);
    // e2 replayed while e1 is the head: it bounces (KEY_PARKED), its new letter keeps the first one's time.
    await replayDeadLetters({ kafka: testKafka(), dlqTopic: s.dlq, consumer, ids: [String(e2?.id)] });
    const letters = await collect([s.dlq], (rs) => rs.length >= 3);
    const ofE2 = letters.filter((l) => l.headers.id === e2?.id);
    expect(ofE2).toHaveLength(2);
    expect(ofE2[0]?.headers['x-first-dead-lettered-at']).toMatch(/^\d+$/);
    expect(ofE2[1]?.headers['x-first-dead-lettered-at']).toBe(ofE2[0]?.headers['x-first-dead-lettered-at']);

    // A letter written now of an event first dead-lettered ten days ago is beyond a seven-day horizon.
    const t = await scenario(1);
    const headers = (first?: number) => ({ id: randomUUID(), 'x-original-topic': t.topic, 'x-consumer': consumer, ...(first ? { 'x-first-dead-lettered-at': String(first) } : {}) });
    await h.producer.send({ topic: t.dlq, messages: [{ key: 'bounced', value: 'v', headers: headers(Date.now() - 10 * day) }, { key: 'fresh', value: 'v', headers: headers() }] });
    const report = await replayDeadLetters({ kafka: testKafka(), dlqTopic: t.dlq, consumer, horizonMs: 7 * day, dryRun: true });
    expect(report).toMatchObject({ scanned: 2, beyondHorizon: 1, replayed: 1, sample: [{ key: 'fresh' }] });
  });

  it('--all takes letters without x-consumer (older releases) only with unattributed, and streams its report: every record to onReplayed, a bounded sample kept', async () => {
    const s = await scenario(1);
    const n = 3_000;
    const messages = Array.from({ length: n }, (_, i) => ({ key: `k${i % 50}`, value: 'v', headers: { id: randomUUID(), 'x-original-topic': s.topic, 'x-consumer': 'mine' } }));
    await h.producer.send({ topic: s.dlq, messages: [...messages, { key: 'legacy', value: 'v', headers: { id: randomUUID(), 'x-original-topic': s.topic } }, { key: 'theirs', value: 'v', headers: { id: randomUUID(), 'x-original-topic': s.topic, 'x-consumer': 'other' } }] });
    const streamed: string[] = [];
    const report = await replayDeadLetters({ kafka: testKafka(), dlqTopic: s.dlq, consumer: 'mine', dryRun: true, onReplayed: (r) => void streamed.push(String(r.id)) });
    expect(report).toMatchObject({ scanned: n + 2, replayed: n, unattributed: 1, otherConsumer: 1 });
    expect(streamed).toEqual(messages.map((m) => m.headers.id));
    expect(report.sample).toHaveLength(100);
    expect(await replayDeadLetters({ kafka: testKafka(), dlqTopic: s.dlq, consumer: 'mine', unattributed: true, dryRun: true })).toMatchObject({ replayed: n + 1, unattributed: 0, otherConsumer: 1 });
  });

  it('dlq:release says when a running router parked a released key again (its batch had loaded the old head)', async () => {
    const s = await scenario(1);
    const consumer = `c-${s.run}`;
    let broken = true;
    const base = recording(s, consumer, (reason) => broken && reason === 'poison');
    let locker: PoolClient | undefined;
    const released = async () => !(await parkedIds(consumer)).includes(String(poison?.id));
    // `slow` (another key, just before an event of k in one batch) lets the release through and waits for it.
    const letThrough: EventHandler = async (event, ctx) => {
      if (event.payload.reason === 'slow') {
        await locker?.query('COMMIT');
        locker?.release();
        while (!(await released())) await new Promise((done) => setTimeout(done, 10));
      }
      await (base.order?.OrderCancelled as EventHandler)(event, ctx);
    };
    const r = await startRouter(s, { order: { OrderCancelled: letThrough } }, { maxAttempts: 1, maxTransactionRecords: 1, lanes: 1 });
    const [poison] = await produce(s, [{ key: 'k', reason: 'poison' }]);
    await until('k parked', () => r.stats(), (st) => st.deadLettered === 1);
    broken = false;

    // The release waits on a lock on k's parked row, so that it lands inside the next batch, after
    // that batch loaded k's head (a batch starts no new record after 500 ms, so it must be quick).
    locker = await h.pool.connect();
    await locker.query('BEGIN');
    await locker.query(`SELECT 1 FROM ${table} WHERE consumer = $1 FOR UPDATE`, [consumer]);
    const { database } = h.config;
    const child = spawn(process.execPath, [join(PROJECT_ROOT, 'dist/cli/main.js'), 'dlq:release', '--aggregate-type', 'order', '--key', 'k', '--consumer', consumer, '--settle-ms', '3000'], {
      env: { ...process.env, PGHOST: database.host, PGPORT: String(database.port), PGDATABASE: database.database, PGUSER: database.user, PGPASSWORD: database.password ?? '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const waiting = async () =>
      (await h.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'outbox-dlq-release' AND wait_event_type = 'Lock'")).rows[0]?.n;
    let next: { id: string } | undefined;
    try {
      await until('the release waits on the lock', waiting, (n) => n === 1);
      [, next] = await produce(s, [{ key: 'x', reason: 'slow' }, { key: 'k', reason: 'next' }]);
      expect(await exited).toBe(0);
    } finally {
      // Not let through (the test failed before): end the lock so the harness can close its pool.
      if (locker && !(await released())) {
        await locker.query('ROLLBACK').catch(() => {});
        locker.release();
      }
      child.kill();
    }
    expect(await parkedIds(consumer)).toEqual([next?.id]);
    expect(stdout).toContain('released 1 parked dead letter(s) of order key k');
    expect(stdout).toMatch(new RegExp(`parked again within 3000 ms: key=k {2}head ${String(next?.id)} \\(KEY_PARKED\\), 1 parked row\\(s\\)`));
  });
});
