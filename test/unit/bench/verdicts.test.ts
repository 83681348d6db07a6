import { formatBench, formatValue, formatVerdicts } from '../../../src/bench/format';
import type { Load } from '../../../src/bench/load';
import type { RateRun, SustainedRun } from '../../../src/bench/pipeline';
import type { BenchResults } from '../../../src/bench/run-bench';
import { buildVerdicts } from '../../../src/bench/verdicts';

const load: Load = { seconds: 5, cores: 2, machineBusyPct: 196, cpuPct: { postgres: 90, benchNode: 70, connect: 30 }, dbXactPerSec: 1500 };

const rateRun = (rate: number, p50: number, p99: number): RateRun => ({
  rate,
  seconds: 8,
  committed: rate * 8,
  committedPerSec: rate,
  handled: rate * 8,
  missing: 0,
  commitToHandledMs: { p50, p95: p99 - 1, p99, max: p99 + 10 },
  commitToKafkaMs: { p50: 5, p95: 10, p99: 12 },
  kafkaToHandledMs: { p50: p50 - 5, p95: p99 - 12, p99: p99 - 12 },
  routerTransactionMs: { p50: 8, p99: 40 },
  writerXactPerSec: rate,
  load,
});

const sustained = (handled: number, committed: number, backlogEnd: number): SustainedRun => ({
  seconds: 16,
  writers: 4,
  eventsPerTransaction: 10,
  committed: committed * 16,
  handled: committed * 16,
  steady: { seconds: 8, committedPerSec: committed, handledPerSec: handled, backlogStart: 1000, backlogEnd, backlogGrew: backlogEnd > 2000, commitToKafkaP50Ms: 30, kafkaToHandledP50Ms: 2500 },
  overall: { seconds: 18, handledPerSec: handled, drainSeconds: 2, drainPerSec: 4000, missing: 0 },
  writerXactPerSec: committed / 10,
  load,
});

function results(overrides: Partial<BenchResults> = {}): BenchResults {
  return {
    machine: { cpus: 2, node: 'v20', when: '2026-01-01T00:00:00Z' },
    options: { seconds: 8, rates: [500, 1000], only: ['cdc', 'raw', 'watchdog', 'writer'], concurrency: 8, sustainedSeconds: 16, writers: 4, eventsPerTransaction: 10, partitions: 4 },
    errors: {},
    verdicts: [],
    missed: [],
    durationSeconds: 100,
    ...overrides,
  };
}

describe('buildVerdicts', () => {
  it('holds latency targets at 1,000 events/s only; other rates are reported for reference', () => {
    const v = buildVerdicts(results({ cdc: { pipeline: 'cdc', fixed: [rateRun(500, 50, 150), rateRun(1000, 20, 90)] } }));
    expect(v.find((x) => x.id === 'cdc.latency500.p99')?.pass).toBeUndefined();
    expect(v.find((x) => x.id === 'cdc.latency1000.p50')?.pass).toBe(true);
    expect(v.find((x) => x.id === 'cdc.latency1000.p99')?.pass).toBe(true);
  });

  it('explains a missed latency target with the split and the CPU samples', () => {
    const v = buildVerdicts(results({ cdc: { pipeline: 'cdc', fixed: [rateRun(1000, 45, 300)] } }));
    const p99 = v.find((x) => x.id === 'cdc.latency1000.p99');
    expect(p99?.pass).toBe(false);
    expect(p99?.why).toContain('commit -> Kafka 12 ms');
    expect(p99?.why).toContain('Kafka -> handled 288 ms');
    expect(p99?.why).toContain('inbox transactions took p50 8 / p99 40 ms');
    expect(p99?.why).toContain('machine CPU 196% of 200% (saturated)');
    expect(v.find((x) => x.id === 'cdc.latency1000.p50')?.pass).toBe(false);
  });

  it('sustained throughput: says whether the pipeline or the writers were the limit, and gives the ratio to raw Kafka', () => {
    const behind = buildVerdicts(results({ cdc: { pipeline: 'cdc', fixed: [], sustained: sustained(2000, 3000, 9000) }, raw: { partitions: 4, produced: 1, consumed: 1, eventsPerSecond: 20000, produceSeconds: 1, producedPerSec: 1, bytesPerRecord: 80, load } }));
    const t = behind.find((x) => x.id === 'cdc.sustained');
    expect(t?.pass).toBe(false);
    expect(t?.why).toContain('the pipeline fell behind');
    expect(t?.why).toContain('drained at 4000/s');
    expect(t?.why).toContain('p50 30 ms commit -> Kafka (Debezium) and 2500 ms Kafka -> handled (router)');
    expect(behind.find((x) => x.id === 'cdc.sustained.ratioToRaw')?.value).toBe(0.1);

    const writerBound = buildVerdicts(results({ relay: { pipeline: 'relay', fixed: [], sustained: sustained(3000, 3000, 1000), settings: { workers: 4, batchSize: 500, pollIntervalMs: 100 } } }));
    expect(writerBound.find((x) => x.id === 'relay.sustained')?.why).toContain('the writers were the limit');
    expect(buildVerdicts(results({ cdc: { pipeline: 'cdc', fixed: [], sustained: sustained(6000, 6000, 1000) } })).find((x) => x.id === 'cdc.sustained')?.pass).toBe(true);
  });

  it('watchdog: p95 database time and the worst detection delay', () => {
    const v = buildVerdicts(
      results({ watchdog: { slots: 10, polls: 200, serverMs: { p50: 1, p95: 2, max: 9 }, roundTripMs: { p50: 2, p95: 3, max: 10 }, intervalMs: 200, detectionIntervals: [0.5, 2.5, 1], load } }),
    );
    expect(v.find((x) => x.id === 'watchdog.pollMs')?.pass).toBe(true);
    const d = v.find((x) => x.id === 'watchdog.detectionIntervals');
    expect(d?.value).toBe(2.5);
    expect(d?.pass).toBe(false);
    expect(d?.why).toContain('0.5, 2.5, 1');
  });
});

describe('formatting', () => {
  it('formats figures: grouped thousands, fewer decimals for larger numbers, n/a for NaN', () => {
    expect(formatValue(12345.6)).toBe('12,346');
    expect(formatValue(12.34)).toBe('12.3');
    expect(formatValue(0.8512)).toBe('0.851');
    expect(formatValue(Number.NaN)).toBe('n/a');
    expect(formatValue(Infinity)).toBe('∞');
  });

  it('puts each figure beside its target with ✓ or ✗, and lists missed targets with why', () => {
    const r = results({ cdc: { pipeline: 'cdc', fixed: [rateRun(1000, 20, 300)] }, errors: { relay: 'connect refused' } });
    r.verdicts = buildVerdicts(r);
    const text = formatBench(r);
    expect(text).toMatch(/@1000\/s commit -> handled p50\s*│\s*20 ms\s*│\s*≤ 30\s*│\s*✓/);
    expect(text).toMatch(/@1000\/s commit -> handled p99\s*│\s*300 ms\s*│\s*≤ 100\s*│\s*✗/);
    expect(text).toContain('Missed targets:');
    expect(text).toContain('why: p99 splits into');
    expect(text).toContain('relay: connect refused');
    expect(text).toContain('targets: 1 met, 1 missed (of 2)');
  });

  it('names a part once, on its first row', () => {
    const table = formatVerdicts([
      { id: 'a', part: 'watchdog', what: 'one', value: 1, unit: 'ms' },
      { id: 'b', part: 'watchdog', what: 'two', value: 2, unit: 'ms' },
    ]);
    expect(table.match(/watchdog/g)).toHaveLength(1);
  });
});
