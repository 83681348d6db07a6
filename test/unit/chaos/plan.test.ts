/** The chaos run's plan: transactions, faults, profiles, the crash-recovery note and the soak verdicts (pure parts). */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { firstAfter } from '../../../scripts/chaos/checks';
import { quorumLeader } from '../../../scripts/chaos/cluster-faults';
import { crashRecoveryFrom, faultPlan, FAULT_KINDS } from '../../../scripts/chaos/faults';
import { failoverNote } from '../../../scripts/stack/cluster-postgres';
import { HANDLERS_JS } from '../../../scripts/chaos/handlers';
import { PROFILES, profileFor, soakVerdicts } from '../../../scripts/chaos/run-chaos';
import type { SoakSample } from '../../../scripts/chaos/types';
import { aggregateIds, behindPoison, commitOrderInversions, newWriteState, planTransaction } from '../../../scripts/chaos/writers';
import { growthVerdicts } from '../../../scripts/soak/sampling';

describe('chaos transactions (planTransaction)', () => {
  const profile = PROFILES.ci;
  const aggregates = aggregateIds(profile);
  const plans = Array.from({ length: 30_000 }, (_, n) => planTransaction(n, profile, aggregates));
  const hot = new Set(aggregates.slice(0, profile.hotAggregates));

  it('is the same for the same n (a run can be repeated)', () => {
    expect(planTransaction(1234, profile, aggregates)).toEqual(plans[1234]);
  });

  it('sends about hotShare of the transactions to the hot aggregates and spreads the rest over all the others', () => {
    const onHot = plans.filter((p) => hot.has(p.aggregate)).length / plans.length;
    expect(onHot).toBeGreaterThan(profile.hotShare - 0.02);
    expect(onHot).toBeLessThan(profile.hotShare + 0.02);
    expect(new Set(plans.map((p) => p.aggregate)).size).toBe(profile.aggregates);
  });

  it('rolls back about rollbackShare, marks about flakyShare flaky, and random delays within maxDelayMs', () => {
    const share = (f: (p: (typeof plans)[number]) => boolean) => plans.filter(f).length / plans.length;
    expect(share((p) => p.rollback)).toBeCloseTo(profile.rollbackShare, 1);
    expect(share((p) => p.fail === 'flaky')).toBeCloseTo(profile.flakyShare, 2);
    expect(Math.max(...plans.map((p) => Math.max(p.lockDelayMs, p.commitDelayMs)))).toBeLessThan(profile.maxDelayMs);
    expect(new Set(plans.map((p) => p.lockDelayMs)).size).toBeGreaterThan(10);
  });

  it('poison: at most one in poisonEvery, never on a hot aggregate, never rolled back', () => {
    const poison = plans.filter((p) => p.fail === 'poison');
    expect(poison.length).toBeGreaterThan(0);
    expect(poison.length).toBeLessThanOrEqual(plans.length / profile.poisonEvery);
    expect(poison.some((p) => hot.has(p.aggregate) || p.rollback)).toBe(false);
  });

  it('behindPoison: the events of an aggregate from its first poison event on', () => {
    const state = newWriteState();
    state.parkedFrom.set('agg-0010', 5);
    const event = (aggregate: string, seq: number) => ({ at: 0, began: 0, aggregate, seq, fail: undefined });
    expect([4, 5, 6].map((seq) => behindPoison(state, event('agg-0010', seq)))).toEqual([false, true, true]);
    expect(behindPoison(state, event('agg-0011', 9))).toBe(false);
  });
});

describe('recovery: the first events after a fault', () => {
  it('takes the first event after the fault of each distinct aggregate, in commit order, leaving out parked keys', () => {
    const state = newWriteState();
    const add = (id: string, at: number, aggregate: string, seq: number) => state.committed.set(id, { at, began: at, aggregate, seq, fail: undefined });
    add('e0', 5, 'a', 1);
    add('e1', 12, 'a', 2);
    add('e2', 11, 'b', 1);
    add('e3', 13, 'a', 3);
    add('e4', 14, 'c', 1);
    add('e5', 15, 'd', 4);
    state.parkedFrom.set('d', 2);
    expect(firstAfter(state, 10, 20)).toEqual(['e2', 'e1', 'e4']);
    expect(firstAfter(state, 10, 2)).toEqual(['e2', 'e1']);
  });
});

describe('commitOrderInversions', () => {
  it('counts the transactions that committed ahead of one of their aggregate that began earlier', () => {
    const e = (aggregate: string, seq: number, began: number) => ({ at: 0, began, aggregate, seq, fail: undefined });
    expect(commitOrderInversions([e('a', 1, 10), e('a', 2, 5), e('a', 3, 20), e('b', 2, 1), e('b', 1, 2)])).toBe(2);
    expect(commitOrderInversions([e('a', 1, 1), e('a', 2, 2)])).toBe(0);
  });
});

describe('chaos fault plan and profiles', () => {
  it('kills Kafka and the postmaster as well as stopping them gracefully, and a router three times', () => {
    for (const pipeline of ['cdc', 'relay'] as const) {
      const kinds = faultPlan(pipeline).map((f) => f.kind);
      expect(kinds.filter((k) => k === 'kill-router')).toHaveLength(3);
      expect(kinds).toEqual(expect.arrayContaining(['restart-kafka', 'kill-kafka', 'restart-postgres', 'kill-postgres']));
      expect(kinds.filter((k) => k === (pipeline === 'cdc' ? 'kill-connect' : 'kill-relay'))).toHaveLength(2);
      expect(kinds.every((k) => FAULT_KINDS.includes(k))).toBe(true);
      const at = faultPlan(pipeline).map((f) => f.at);
      expect(at).toEqual([...at].sort((a, b) => a - b));
    }
  });

  it('on the cluster profile: the leader broker, the controller, the task worker and two primary failovers', () => {
    for (const pipeline of ['cdc', 'relay'] as const) {
      const kinds = faultPlan(pipeline, 'cluster').map((f) => f.kind);
      expect(kinds.filter((k) => k === 'kill-router')).toHaveLength(3);
      expect(kinds.filter((k) => k === 'failover-postgres')).toHaveLength(2);
      expect(kinds).toEqual(expect.arrayContaining(['kill-kafka-leader', 'kill-kafka-controller']));
      expect(kinds.filter((k) => k === (pipeline === 'cdc' ? 'kill-connect-worker' : 'kill-relay'))).toHaveLength(2);
      // The single-node faults stop a whole service: on a cluster they would stop all three brokers.
      expect(kinds.some((k) => ['restart-kafka', 'kill-kafka', 'kill-connect', 'kill-postgres', 'restart-postgres'].includes(k))).toBe(false);
      expect(kinds.every((k) => FAULT_KINDS.includes(k))).toBe(true);
    }
  });

  it('reads the KRaft leader from a quorum-state file, and no leader from one without', () => {
    expect(quorumLeader('{"clusterId":"","leaderId":2,"leaderEpoch":7,"votedId":-1,"data_version":1}')).toEqual({ nodeId: 2, epoch: 7 });
    expect(quorumLeader('{"leaderId":-1,"leaderEpoch":3}')).toBeUndefined();
    expect(quorumLeader('{"leaderId":')).toBeUndefined();
  });

  it('a failover note names the standby slot state before promotion, and a missing slot loudly', () => {
    const slot = { slot_name: 's', slot_type: 'logical', failover: true, synced: true, temporary: false, invalidation_reason: null, confirmed_flush_lsn: '0/3000060', restart_lsn: '0/3000028' };
    const report = {
      from: 'a' as const, to: 'b' as const, primaryLsn: '0/3000100', primarySlots: [slot], standbyReceiveLsn: '0/3000100', standbyReplayLsn: '0/3000100',
      standbySlots: [slot], promotedLsn: '0/3000200', promotedTimeline: 2, promotedSlots: [slot], killToPromotedMs: 900, killToProxySwitchedMs: 950, totalMs: 1200,
    };
    expect(failoverNote(report)).toContain('s synced=true temporary=false confirmed_flush 0/3000060');
    expect(failoverNote(report)).toContain('kill → promoted 900 ms');
    expect(failoverNote({ ...report, standbySlots: [] })).toContain('NO logical slot on the standby');
  });

  it('every profile runs two routers with lanes above 1 and failing handlers', () => {
    for (const profile of Object.values(PROFILES)) {
      expect(profile.routers).toBe(2);
      expect(profile.lanes).toBeGreaterThan(1);
      expect(profile.flakyShare).toBeGreaterThan(0);
      expect(profile.poisonEvery).toBeGreaterThan(0);
    }
  });

  it('the soak profile writes for --minutes at its rate; the others keep their event count', () => {
    expect(profileFor('soak', { minutes: 3 })).toMatchObject({ minutes: 3, events: 3 * 60 * PROFILES.soak.rate, soak: true });
    expect(profileFor('soak')).toMatchObject({ minutes: 30 });
    expect(profileFor('ci')).toMatchObject({ events: 6_000, minutes: 0, soak: false });
    expect(profileFor('ci', { events: 100 }).events).toBe(100);
  });
});

describe('crash recovery in the PostgreSQL log', () => {
  it('reads "automatic recovery in progress" and the redo end', () => {
    const log = [
      'LOG:  database system was interrupted; last known up at 2026-12-02 03:00:00 UTC',
      'LOG:  database system was not properly shut down; automatic recovery in progress',
      'LOG:  redo starts at 0/1A2B3C4',
      'LOG:  redo done at 0/1A3F000 system usage: CPU: user: 0.01 s',
    ].join('\n');
    expect(crashRecoveryFrom(log)).toBe('crash recovery ran (redo done at 0/1A3F000)');
    expect(crashRecoveryFrom('LOG:  database system was shut down at 2026-12-02')).toBe('crash recovery NOT seen in the server log');
  });
});

describe('growth verdicts (shared with the data-lifecycle run)', () => {
  it('compares the last third with the middle third, with 25 % and an absolute slack', () => {
    const flat = [10, 50, 52, 51, 53, 52, 54].map((v) => ({ v }));
    expect(growthVerdicts(flat, [['v', 0]])).toEqual([{ key: 'v', middle: 52, last: 53, flat: true }]);
    const growing = [10, 20, 30, 40, 50, 60].map((v) => ({ v }));
    expect(growthVerdicts(growing, [['v', 0]])[0]).toMatchObject({ middle: 35, last: 55, flat: false });
    expect(growthVerdicts(growing, [['v', 100]])[0]?.flat).toBe(true);
  });

  it('soakVerdicts judges the RSS of every process, also one that appeared late', () => {
    const sample = (minute: number, rss: Record<string, number>): SoakSample => ({
      minute, committed: 0, handled: 0, rssMb: rss,
      outboxRows: 0, outboxBytes: 1000, inboxRows: 0, inboxBytes: 1000, parkedRows: 0, parkedBytes: 0, slotUnconfirmedBytes: 0,
    });
    const samples = [sample(1, { 'router-a': 80 }), sample(2, { 'router-a': 80, relay: 60 }), sample(3, { 'router-a': 200, relay: 60 })];
    const verdicts = soakVerdicts(samples);
    expect(verdicts.map((v) => v.key)).toEqual(['outboxBytes', 'inboxBytes', 'parkedBytes', 'slotUnconfirmedBytes', 'rssMb.router-a', 'rssMb.relay']);
    expect(verdicts.find((v) => v.key === 'rssMb.router-a')?.flat).toBe(false);
    expect(verdicts.find((v) => v.key === 'rssMb.relay')?.flat).toBe(true);
  });
});

describe('the chaos handler module', () => {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const load = () => {
    const dir = mkdtempSync(join(tmpdir(), 'chaos-handlers-'));
    const file = join(dir, 'handlers.js');
    writeFileSync(file, HANDLERS_JS);
    return (require(file) as { order: { OrderCreated: (event: unknown, ctx: unknown) => Promise<void> } }).order.OrderCreated;
  };
  const fakeTx = (fixed: string[]) => {
    const effects: unknown[][] = [];
    return {
      effects,
      tx: {
        query: async (text: string, values: unknown[]) => {
          if (text.startsWith('SELECT 1 FROM chaos_fixed')) return { rowCount: fixed.includes(values[0] as string) ? 1 : 0 };
          effects.push(values);
          return { rowCount: 1 };
        },
      },
    };
  };
  const event = (id: string, fail?: string) => ({ id, aggregateId: 'agg-0001', headers: { seq: '3', ...(fail ? { fail } : {}) } });

  it('applies a plain event; a flaky one throws on its first two attempts, then applies', async () => {
    const handler = load();
    const { tx, effects } = fakeTx([]);
    await handler(event('e-1'), { tx });
    await expect(handler(event('e-2', 'flaky'), { tx })).rejects.toThrow('flaky handler, attempt 1');
    await expect(handler(event('e-2', 'flaky'), { tx })).rejects.toThrow('attempt 2');
    await handler(event('e-2', 'flaky'), { tx });
    expect(effects).toEqual([['e-1', 'agg-0001', 3], ['e-2', 'agg-0001', 3]]);
  });

  it('a poison event throws until its id is in chaos_fixed', async () => {
    const handler = load();
    const broken = fakeTx([]);
    for (let i = 0; i < 6; i++) await expect(handler(event('e-3', 'poison'), { tx: broken.tx })).rejects.toThrow('poison event e-3, not fixed yet');
    const fixed = fakeTx(['e-3']);
    await handler(event('e-3', 'poison'), { tx: fixed.tx });
    expect(fixed.effects).toEqual([['e-3', 'agg-0001', 3]]);
  });
});
