import { chartSpec, ticks125 } from '../../../scripts/bench/chart';
import { eventLoopFromMetrics, metricValue } from '../../../scripts/bench/cli-process';
import { cpuPerEvent, pipelineCpuPerEvent } from '../../../scripts/bench/load';

describe('the latency-versus-rate chart spec', () => {
  const spec = chartSpec({
    title: 't',
    points: [
      { pipeline: 'CDC', rate: 98, asked: 100, p50: 20, p99: 50 },
      { pipeline: 'CDC', rate: 910, asked: 1000, p50: 30, p99: Number.NaN },
    ],
    maxima: [{ pipeline: 'CDC', rate: 1000 }],
  }) as { layer: Array<{ data: { values: Array<Record<string, unknown>> }; mark: { type: string }; encoding: Record<string, { scale?: { type: string } }> }> };

  it('plots p50 and p99 per pipeline at the rate the writer reached, on log scales; an unmeasured value is left out', () => {
    const [lines] = spec.layer;
    expect(lines?.data.values).toEqual([
      { pipeline: 'CDC', rate: 98, asked: 100, percentile: 'p50', ms: 20 },
      { pipeline: 'CDC', rate: 98, asked: 100, percentile: 'p99', ms: 50 },
      { pipeline: 'CDC', rate: 910, asked: 1000, percentile: 'p50', ms: 30 },
    ]);
    expect(lines?.encoding.x?.scale?.type).toBe('log');
    expect(lines?.encoding.y?.scale?.type).toBe('log');
  });

  it('labels the log rate axis 1-2-5 across the data', () => {
    expect(ticks125(98, 5000)).toEqual([50, 100, 200, 500, 1000, 2000, 5000]);
    expect(ticks125(100, 1400)).toEqual([100, 200, 500, 1000, 2000]);
    expect(ticks125(Number.NaN, 1)).toEqual([]);
  });

  it('marks the sustained maximum with a rule and a label', () => {
    expect(spec.layer[1]?.mark.type).toBe('rule');
    expect(spec.layer[1]?.data.values[0]).toMatchObject({ pipeline: 'CDC', rate: 1000 });
    expect(spec.layer[2]?.data.values[0]?.label).toBe('CDC max 1000/s');
  });
});

describe('CPU per event and the processes\' metrics', () => {
  it('CPU µs per event = % of a core × seconds ÷ events; the pipeline total leaves out other processes', () => {
    const perEvent = cpuPerEvent({ seconds: 10, cpuPct: { postgres: 50, router: 20, otherNode: 30 } }, 10_000);
    expect(perEvent).toEqual({ postgres: 500, router: 200, otherNode: 300 });
    expect(pipelineCpuPerEvent(perEvent)).toBe(700);
    expect(cpuPerEvent({ seconds: 10, cpuPct: { postgres: 50 } }, 0)).toEqual({});
  });

  it("reads prom-client's event-loop delay gauges (seconds) as ms", () => {
    const text = [
      '# HELP nodejs_eventloop_lag_p50_seconds The 50th percentile',
      'nodejs_eventloop_lag_p50_seconds 0.0105',
      'nodejs_eventloop_lag_p99_seconds 0.02915',
      'nodejs_eventloop_lag_max_seconds 0.0305',
      'outbox_router_applied_total{aggregate_type="order"} 12',
    ].join('\n');
    expect(metricValue(text, 'applied_total')).toBe(12);
    expect(eventLoopFromMetrics(text)).toEqual({ p50: 10.5, p99: 29.15, max: 30.5 });
    expect(eventLoopFromMetrics('nothing 1')).toBeUndefined();
  });
});
