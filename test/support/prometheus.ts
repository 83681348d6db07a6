import axios from 'axios';
import { ensureDebianBinary, startLocalServer, type DebianServer, type EnsureDeps } from './debian-service';

/** Where Debian's prometheus package (2.42 on bookworm) puts the binaries. */
export const DEBIAN_PROMETHEUS_BIN = '/usr/bin/prometheus';
export const PROMETHEUS_BIN = process.env.PROMETHEUS_BIN ?? DEBIAN_PROMETHEUS_BIN;

/**
 * Without its recommendations (prometheus-node-exporter, smartmontools: more services). Its own service
 * would listen on 9090 with /var/lib/prometheus as storage: stopped after the install.
 */
const PROMETHEUS: DebianServer = { name: 'Prometheus', package: 'prometheus', debianBinary: DEBIAN_PROMETHEUS_BIN, env: 'PROMETHEUS_BIN', services: ['prometheus'], recommends: false };

/** The Prometheus binary, installed from Debian's packages when it is missing (ensureDebianBinary). */
export function ensurePrometheus(binary = PROMETHEUS_BIN, deps: EnsureDeps = {}): string {
  return ensureDebianBinary(PROMETHEUS, binary, deps);
}

/** promtool: the package puts it beside prometheus. */
export const promtoolBinary = (): string => ensurePrometheus().replace(/prometheus$/, 'promtool');

export interface QueryResult {
  resultType: string;
  result: Array<{ metric: Record<string, string>; value: [number, string] }>;
}

export interface LocalPrometheus {
  url: string;
  /** An instant query through /api/v1/query; rejects with Prometheus's error for a failed query. */
  query(expr: string): Promise<QueryResult>;
  stop(): Promise<void>;
}

/**
 * A real Prometheus on a free local port (never the packaged service's 9090), its TSDB in a temp dir,
 * scraping `jobs` (job name → host:port targets) every `scrapeInterval`.
 */
export async function startPrometheus(options: { jobs: Record<string, string[]>; scrapeInterval?: string; ruleFiles?: string[] }): Promise<LocalPrometheus> {
  const interval = options.scrapeInterval ?? '1s';
  const config = {
    global: { scrape_interval: interval, evaluation_interval: interval },
    rule_files: options.ruleFiles ?? [],
    scrape_configs: Object.entries(options.jobs).map(([job, targets]) => ({ job_name: job, static_configs: [{ targets }] })),
  };
  const { url, stop } = await startLocalServer({
    name: 'Prometheus',
    binary: ensurePrometheus(),
    files: { 'prometheus.yml': JSON.stringify(config) },
    args: (dir, port) => [`--config.file=${dir}/prometheus.yml`, `--storage.tsdb.path=${dir}/data`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    readyPath: '/-/ready',
  });
  const query = async (expr: string): Promise<QueryResult> => {
    const res = await axios.get<{ status: string; data?: QueryResult; error?: string; errorType?: string }>(`${url}/api/v1/query`, { params: { query: expr }, validateStatus: () => true, timeout: 10_000 });
    if (res.data.status !== 'success' || !res.data.data) throw new Error(`${expr}: ${res.data.errorType ?? res.status} ${res.data.error ?? ''}`);
    return res.data.data;
  };
  return { url, query, stop };
}
