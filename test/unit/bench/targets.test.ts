import type { Load } from '../../../scripts/bench/load';
import { cpuNote, formatPerEvent, LATENCY_TARGETS, meets, TARGETS, verdict } from '../../../scripts/bench/targets';

const load = (cpuPct: Record<string, number>, machineBusyPct: number): Load => ({ seconds: 5, cores: 2, machineBusyPct, cpuPct });

describe('target verdicts', () => {
  it('>= and <= compare inclusively', () => {
    expect(meets(5000, TARGETS.throughput)).toBe(true);
    expect(meets(4999.9, TARGETS.throughput)).toBe(false);
    expect(meets(0.85, TARGETS.writerRatio)).toBe(true);
    expect(meets(200.1, TARGETS.routerRssMb)).toBe(false);
  });

  it('an unmeasured figure (NaN, Infinity) never passes', () => {
    expect(meets(Number.NaN, TARGETS.routerRssMb)).toBe(false);
    expect(meets(Number.NaN, TARGETS.throughput)).toBe(false);
    expect(meets(Infinity, TARGETS.watchdogDetectionIntervals)).toBe(false);
    expect(meets(Infinity, TARGETS.throughput)).toBe(false);
  });

  it('a figure without a target has no pass', () => {
    expect(verdict({ id: 'x', part: 'p', what: 'w', value: 1, unit: 'u' }).pass).toBeUndefined();
    expect(verdict({ id: 'x', part: 'p', what: 'w', value: 0.9, unit: 'x', target: TARGETS.writerRatio }).pass).toBe(true);
    expect(verdict({ id: 'x', part: 'p', what: 'w', value: 0.8, unit: 'x', target: TARGETS.writerRatio }).pass).toBe(false);
  });

  it('the documented targets (docs/bench.md, issue 12)', () => {
    expect(LATENCY_TARGETS).toEqual([
      { pipeline: 'cdc', rate: 200, p50: 10, p99: 30 },
      { pipeline: 'cdc', rate: 1000, p50: 10, p99: 30 },
      { pipeline: 'cdc', rate: 2000, p99: 50 },
      { pipeline: 'cdc', rate: 5000, p99: 100 },
      { pipeline: 'relay', rate: 1000, p50: 15, p99: 50 },
    ]);
    expect(TARGETS.throughput.value).toBe(5000);
    expect(TARGETS.routerBatchDrain).toEqual({ comparator: '>=', value: 20_000 });
    expect(TARGETS.writerRatio.value).toBe(0.85);
    expect(TARGETS.routerRatio.value).toBe(0.5);
    expect(TARGETS.watchdogPollMs.value).toBe(5);
    expect(TARGETS.watchdogDetectionIntervals.value).toBe(2);
    expect(TARGETS.routerRssMb.value).toBe(200);
  });
});

describe('cpuNote', () => {
  it('names a saturated machine and its biggest users, largest first, leaving out small ones', () => {
    const note = cpuNote(load({ postgres: 80, benchNode: 60, connect: 40, kafka: 3 }, 195));
    expect(note).toContain('machine CPU 195% of 200% (saturated)');
    expect(note).toMatch(/postgres 80%.*bench node process \(measuring only\) 60%.*Kafka Connect \(Debezium\) 40%/);
    expect(note).not.toContain('Kafka broker');
  });

  it('says when the single-threaded bench process used a full core', () => {
    expect(cpuNote(load({ benchNode: 97 }, 120), 'writers')).toContain('used a full core: writers compete for it');
    expect(cpuNote(load({ benchNode: 50 }, 120))).not.toContain('full core');
  });

  it('without samples says so', () => {
    expect(cpuNote(undefined)).toBe('no CPU samples');
  });
});

describe('CPU per event in a why note', () => {
  it('lists the groups costing 5 µs or more, biggest first, and the pipeline total without other processes', () => {
    const text = formatPerEvent({ postgres: 120, connect: 80, router: 60, registry: 2, otherNode: 500 });
    expect(text).toBe("other node processes 500 µs, postgres 120 µs, Kafka Connect (Debezium) 80 µs, router process 60 µs (the pipeline's processes: 262 µs)");
    expect(cpuNote(load({ postgres: 50 }, 100), 'measuring only', { postgres: 100 })).toContain('CPU per event: postgres 100 µs');
  });
});
