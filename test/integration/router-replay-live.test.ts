import { qualified } from '../../src/db';
import { parkedTableName } from '../../src/provision/sql-files';
import { replayDeadLetters } from '../../src/router';
import { routerHarness } from '../support/router-scenario';
import { testKafka } from '../support/stack-env';

jest.setTimeout(180_000);

/**
 * A parked key whose events keep coming while it is replayed (the data-lifecycle run: a key gets a new
 * event every few seconds, for ever). The replayed events and the key's new ones interleave on the
 * topic: the new ones are parked behind the replayed ones, after the replay read what was outstanding.
 * One `dlq:replay` must still end with the key released, every event applied once, in order.
 */
describe('router replay of a key that keeps receiving events', () => {
  const h = routerHarness('router_replay_live');
  const { scenario, produce, handlers, startRouter, until, effects } = h;
  const table = qualified('public', parkedTableName('inbox'));

  it('one replay releases the key while events of it keep arriving every 200 ms: each applied exactly once, in order, no parked rows left', async () => {
    const s = await scenario(2);
    const consumer = `c-${s.run}`;
    let broken = true;
    const router = await startRouter(s, handlers(s, (reason) => (broken && reason.startsWith('hot-') ? new Error('hot is broken') : undefined)), { maxAttempts: 2 });

    // The writer: one event of `hot` (and one of `cold`) every 200 ms, until told to stop.
    const written: string[] = [];
    const ids = new Map<string, string>();
    let writing = true;
    let deadLetteredAtRelease = -1;
    const writer = (async () => {
      for (let i = 0; writing; i++) {
        const [hot] = await produce(s, [{ key: 'hot', reason: `hot-${i}` }, { key: 'cold', reason: `cold-${i}` }]);
        written.push(`hot-${i}`);
        ids.set(`hot-${i}`, String(hot?.id));
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    const hotApplied = async () => (await effects(s)).filter((r) => r.aggregate_id === 'hot').map((r) => r.reason);
    const parkedRows = async () => (await h.pool.query<{ event_id: string; error_code: string }>(`SELECT event_id, error_code FROM ${table} WHERE consumer = $1 AND aggregate_id = 'hot' ORDER BY seq`, [consumer])).rows;

    try {
      // Seqs past one digit (the next head must be ordered by number, not text), and a replay long enough for new events to arrive between the replayed ones.
      await until('hot parked with 40 events behind its head', async () => (await parkedRows()).length, (n) => n >= 40);
      expect((await parkedRows())[0]?.error_code).toBe('HANDLER_FAILED');

      broken = false;
      const outstanding = { pool: h.pool, parkedTable: table, consumer, aggregateType: 'order' };
      const report = await replayDeadLetters({ kafka: testKafka(), dlqTopic: s.dlq, outstanding });
      expect(report.stillParked).toEqual([]);
      // The outstanding ids it read, plus any of hot's events parked while it ran (it followed them).
      expect(report.replayed).toBeGreaterThanOrEqual(40);

      // Released while the writer still runs: the events written from now on flow without a dead letter.
      const releasedAt = written.length;
      await until('hot flows again', hotApplied, (reasons) => reasons.includes(`hot-${releasedAt + 3}`));
      expect(await parkedRows()).toEqual([]);
      deadLetteredAtRelease = router.stats().deadLettered;
    } finally {
      writing = false;
      await writer;
    }

    await until('every event of hot applied', hotApplied, (reasons) => reasons.length >= written.length);
    await new Promise((r) => setTimeout(r, 1_000)); // a duplicate would show up now
    const hot = (await effects(s)).filter((r) => r.aggregate_id === 'hot');
    expect(hot.map((r) => r.reason)).toEqual(written); // once each, in order
    expect(hot.map((r) => r.message_id)).toEqual(written.map((w) => ids.get(w)));
    expect(await parkedRows()).toEqual([]);
    expect((await effects(s)).filter((r) => r.aggregate_id === 'cold')).toHaveLength(written.length);
    // Once released, nothing more was dead-lettered (the key's later events flowed).
    expect(router.stats().deadLettered).toBe(deadLetteredAtRelease);
    expect(deadLetteredAtRelease).toBeGreaterThanOrEqual(40);
  });
});
