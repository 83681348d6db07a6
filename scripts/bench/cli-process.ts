/**
 * `outbox router` and `outbox relay` as an operator runs them: `node dist/cli/main.js <command> …`,
 * each its own process, configured by a settings file (--config) and PG* variables that point at the
 * bench's database. The metrics port is any free one (0); the process logs it, and the bench reads
 * /healthz (router joined) and /metrics (prom-client's event-loop delay, reset at every scrape).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { DIST } from './dist-paths';
import { childPids } from './load';
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { OutboxConfig } from 'outbox-router/config';
import type { Logger } from 'outbox-router/log';
import type { EventLoopDelay } from './writer-protocol';

export interface CliProcess {
  pid: number;
  /** Resolves once /healthz answers 200 (the router: running and joined its group). */
  healthy(timeoutMs: number): Promise<void>;
  /** The event-loop delay since the previous call (prom-client resets its histogram at each scrape). */
  eventLoop(): Promise<EventLoopDelay | undefined>;
  /** Exit code, or null while running. */
  exitCode(): number | null;
  /** Everything it logged at warn or above, for an error message. */
  problems(): string[];
  stop(): Promise<void>;
}


/** Prometheus text format → the value of the first sample whose name ends with `suffix`. Pure. */
export function metricValue(text: string, suffix: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = /^([A-Za-z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (match && (match[1] as string).endsWith(suffix)) return Number(match[3]);
  }
  return undefined;
}

/** The event-loop delay gauges of prom-client's default metrics, in ms. Pure. */
export function eventLoopFromMetrics(text: string): EventLoopDelay | undefined {
  const get = (p: string) => metricValue(text, `nodejs_eventloop_lag_${p}_seconds`);
  const [p50, p99, max] = [get('p50'), get('p99'), get('max')];
  if (p50 === undefined || p99 === undefined || max === undefined) return undefined;
  const ms = (s: number) => Math.round(s * 1e5) / 100;
  return { p50: ms(p50), p99: ms(p99), max: ms(max) };
}

export function startCliProcess(options: { command: 'router' | 'relay' | 'watchdog'; args: string[]; config: OutboxConfig; dir: string; env?: Record<string, string>; log: Logger }): CliProcess {
  const { config, command } = options;
  const file = join(options.dir, `${command}-config.json`);
  writeFileSync(file, JSON.stringify(config));
  const { database } = config;
  // OUTBOX_BENCH_NODE_ARGS: extra node flags for the pipeline's processes, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`
  // to profile the router as it runs in the bench (NODE_OPTIONS refuses --cpu-prof).
  const nodeArgs = (process.env.OUTBOX_BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, DIST.cli, '--log-format', 'json', '--log-level', 'info', command, '--config', file, '--metrics-port', '0', ...options.args], {
    env: { ...process.env, PGHOST: database.host, PGPORT: String(database.port), PGDATABASE: database.database, PGUSER: database.user, PGPASSWORD: database.password ?? '', ...options.env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let metricsUrl: string | undefined;
  const problems: string[] = [];
  createInterface({ input: child.stderr as NodeJS.ReadableStream }).on('line', (line) => {
    let entry: { level?: number; msg?: string; metrics?: string; err?: unknown } | undefined;
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      problems.push(line);
      return;
    }
    if (typeof entry?.metrics === 'string') metricsUrl = entry.metrics;
    if ((entry?.level ?? 0) >= 40) {
      problems.push(`${entry?.msg ?? line}${entry?.err ? ` (${JSON.stringify(entry.err)})` : ''}`);
      options.log.warn({ process: command }, `${command}: ${entry?.msg ?? line}`);
    }
  });
  const get = async (path: string) => {
    if (!metricsUrl) return undefined;
    const response = await fetch(metricsUrl.replace(/\/metrics$/, path)).catch(() => undefined);
    return response;
  };
  return {
    pid: child.pid as number,
    exitCode: () => child.exitCode,
    problems: () => [...problems],
    async healthy(timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (child.exitCode !== null) throw new Error(`bench: ${command} exited with code ${child.exitCode}: ${problems.slice(-3).join(' | ') || 'no log'}`);
        const response = await get('/healthz');
        if (response?.status === 200) return;
        if (Date.now() > deadline) throw new Error(`bench: ${command} not healthy within ${timeoutMs} ms${metricsUrl ? '' : ' (no metrics URL logged)'}`);
        await sleep(200);
      }
    },
    async eventLoop() {
      const response = await get('/metrics');
      return response?.ok ? eventLoopFromMetrics(await response.text()) : undefined;
    },
    async stop() {
      if (child.exitCode !== null) return;
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await gone;
      clearTimeout(timer);
    },
  };
}

/**
 * `outbox router` with the bench handlers module (per-event, or its batch form), counted as the
 * `router` process group in the CPU samples.
 */
export function startBenchRouter(o: { config: OutboxConfig; dir: string; log: Logger; handler: 'per-event' | 'batch'; consumer: string; topics: string; args?: string[] }): CliProcess {
  const router = startCliProcess({
    command: 'router',
    config: o.config,
    dir: o.dir,
    log: o.log,
    env: o.handler === 'batch' ? { BENCH_HANDLER: 'batch' } : {},
    args: ['--handlers', DIST.handlers, '--consumer', o.consumer, '--topics', o.topics, ...(o.args ?? [])],
  });
  childPids.set(router.pid, 'router');
  return router;
}
