/**
 * The latency-versus-rate chart (bench/latency-vs-rate.svg): a Vega-Lite spec built here (pure, unit
 * tested) and rendered headless to SVG by `vega` + `vega-lite` (`view.toSVG()`, no canvas). x: the
 * rate the writer reached (log scale); y: commit → handled p50 and p99 (log scale), one colour per
 * pipeline, dashed for p99; a vertical rule at each pipeline's sustained maximum.
 */
import { writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

export interface ChartPoint {
  pipeline: string;
  /** The rate the writer reached, events/s. */
  rate: number;
  /** The rate asked, for the tooltip and label. */
  asked: number;
  p50: number;
  p99: number;
}

export interface ChartInput {
  title: string;
  points: ChartPoint[];
  /** Sustained maximum per pipeline, events/s. */
  maxima: Array<{ pipeline: string; rate: number }>;
}

/** 1-2-5 ticks covering [min, max] (one step beyond each end), for a log axis that is readable. Pure. */
export function ticks125(min: number, max: number): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max) || min <= 0) return [];
  const out: number[] = [];
  for (let decade = 10 ** Math.floor(Math.log10(min)); decade <= max * 10; decade *= 10) {
    for (const m of [1, 2, 5]) out.push(m * decade);
  }
  const below = out.filter((t) => t <= min).pop() ?? out[0];
  const above = out.find((t) => t >= max) ?? out[out.length - 1];
  return out.filter((t) => t >= (below as number) && t <= (above as number));
}

/** The Vega-Lite spec. Pure. Points without a finite latency are left out. */
export function chartSpec(input: ChartInput): Record<string, unknown> {
  const values = input.points.flatMap((p) =>
    (['p50', 'p99'] as const).filter((k) => Number.isFinite(p[k]) && p[k] > 0).map((k) => ({ pipeline: p.pipeline, rate: p.rate, asked: p.asked, percentile: k, ms: p[k] })),
  );
  const color = { field: 'pipeline', type: 'nominal', title: 'pipeline' };
  const rates = [...values.map((v) => v.rate), ...input.maxima.map((m) => m.rate)];
  const x = { field: 'rate', type: 'quantitative', title: 'events/s reached (log)', scale: { type: 'log' }, axis: { values: ticks125(Math.min(...rates), Math.max(...rates)) } };
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: input.title,
    width: 640,
    height: 360,
    background: 'white',
    layer: [
      {
        data: { values },
        mark: { type: 'line', point: true },
        encoding: {
          x,
          y: { field: 'ms', type: 'quantitative', title: 'commit → handled, ms (log)', scale: { type: 'log' } },
          color,
          strokeDash: { field: 'percentile', type: 'nominal', title: 'percentile', sort: ['p50', 'p99'] },
          detail: { field: 'percentile' },
          tooltip: [{ field: 'pipeline' }, { field: 'asked', title: 'asked/s' }, { field: 'rate', title: 'reached/s' }, { field: 'percentile' }, { field: 'ms' }],
        },
      },
      {
        data: { values: input.maxima.map((m) => ({ ...m, label: `${m.pipeline} sustained max ${m.rate}/s` })) },
        mark: { type: 'rule', strokeWidth: 2, opacity: 0.6 },
        encoding: { x, color },
      },
      {
        data: { values: input.maxima.map((m, i) => ({ ...m, label: `${m.pipeline} max ${m.rate}/s`, dy: i })) },
        mark: { type: 'text', align: 'left', dx: 4, baseline: 'top', angle: 0 },
        encoding: { x, y: { value: 6 }, yOffset: { field: 'dy', type: 'quantitative', scale: { range: [0, 28] } }, text: { field: 'label' }, color },
      },
    ],
  };
}

/** The packages the chart needs; not a dependency the rest of the bench needs to run. */
export const CHART_PACKAGES = ['vega', 'vega-lite'] as const;

// A real dynamic import (TypeScript would turn `import()` into require, and vega-lite is ESM with top-level await).
// eslint-disable-next-line @typescript-eslint/no-implied-eval
const importModule = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<unknown>;

/**
 * Renders the spec to an SVG file. Returns undefined on success, or why there is no chart (the
 * packages are not installed): the rest of the results stand without it.
 */
export async function renderChart(spec: Record<string, unknown>, file: string): Promise<string | undefined> {
  let vl: { compile(spec: unknown): { spec: unknown } };
  let vega: { parse(spec: unknown): unknown; View: new (runtime: unknown, options: { renderer: string }) => { toSVG(): Promise<string>; finalize(): void } };
  try {
    // require.resolve honours NODE_PATH; import() of the resolved file then loads the ES module.
    vl = (await importModule(pathToFileURL(require.resolve('vega-lite')).href)) as typeof vl;
    vega = (await importModule(pathToFileURL(require.resolve('vega')).href)) as typeof vega;
  } catch (error) {
    return `no chart: ${CHART_PACKAGES.join(' and ')} are not installed (${(error as Error).message.split('\n')[0]})`;
  }
  const view = new vega.View(vega.parse(vl.compile(spec).spec), { renderer: 'none' });
  try {
    writeFileSync(file, await view.toSVG());
  } finally {
    view.finalize();
  }
  return undefined;
}
