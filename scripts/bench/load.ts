/**
 * What the machine and the database did during a measurement, so a missed target can be explained by
 * data: CPU per process group from /proc/<pid>/stat, the machine's busy share from /proc/stat,
 * transactions on the bench database from pg_stat_database, and the stack's memory (PSS) from
 * /proc/<pid>/smaps_rollup. Linux only; elsewhere the figures come back empty rather than failing.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import type { Client } from 'pg';
import { round } from './stats';

/** Linux's USER_HZ: /proc times are in these ticks. 100 on every mainstream kernel. */
const TICKS_PER_SECOND = 100;

export interface Load {
  seconds: number;
  cores: number;
  /** Busy share of all cores, in % of one core (so at most cores × 100). */
  machineBusyPct: number;
  /** CPU per process group, in % of one core. */
  cpuPct: Record<string, number>;
  /** Transactions (commits + rollbacks) per second on the bench database, all clients. */
  dbXactPerSec?: number;
}

export interface ProcSample {
  at: number;
  /** Busy and total ticks of the whole machine. */
  machine: { busy: number; total: number };
  /** pid → group and ticks (utime + stime). */
  procs: Map<number, { group: string; ticks: number }>;
}

/** utime + stime, comm and the parent pid from /proc/<pid>/stat (comm may contain spaces and parentheses). */
export function parseProcStat(content: string): { comm: string; ticks: number; ppid: number } | undefined {
  const open = content.indexOf('(');
  const close = content.lastIndexOf(')');
  if (open < 0 || close < open) return undefined;
  const fields = content.slice(close + 2).trim().split(/\s+/);
  // After comm: state(0) ppid(1) … utime is field 14 of the line, i.e. index 11 here; stime index 12.
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  if (!Number.isFinite(utime) || !Number.isFinite(stime)) return undefined;
  return { comm: content.slice(open + 1, close), ticks: utime + stime, ppid: Number(fields[1]) };
}

/** The first `cpu` line of /proc/stat: busy = everything but idle and iowait. */
export function parseMachineStat(content: string): { busy: number; total: number } {
  const line = content.split('\n').find((l) => l.startsWith('cpu '));
  if (!line) return { busy: 0, total: 0 };
  const v = line.trim().split(/\s+/).slice(1, 9).map(Number);
  const total = v.reduce((a, b) => a + b, 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  return { busy: total - idle, total };
}

/**
 * The processes of the stack being measured, from its pid files: its JVMs and its PostgreSQL postmaster
 * (whose children are the backends and the walsender). Other PostgreSQL servers and JVMs on the machine
 * (the system's PostgreSQL, another profile of the stack, another checkout's) are then `other`, not the
 * pipeline. Undefined (no pid files): every postgres and Kafka-looking JVM counts.
 */
export interface StackScope {
  javaPids: ReadonlySet<number>;
  /** The single profile's one postmaster, or the cluster profile's two (primary and standby). */
  postmasters?: ReadonlySet<number>;
  /** The cluster profile's PostgreSQL proxy (counted with PostgreSQL: every client goes through it). */
  proxy?: number;
}

export function readStackScope(stateDir: string): StackScope | undefined {
  const pid = (file: string) => {
    try {
      const n = Number(readFileSync(file, 'utf8').split('\n')[0]?.trim());
      return Number.isInteger(n) && n > 0 ? n : undefined;
    } catch {
      return undefined;
    }
  };
  // Both profiles' JVMs: the single one's kafka and connect, the cluster's brokers and workers.
  const jvms = ['kafka', 'connect', 'registry', 'kafka-1', 'kafka-2', 'kafka-3', 'connect-1', 'connect-2'];
  const javaPids = new Set(jvms.map((s) => pid(`${stateDir}/pids/${s}.pid`)).filter((n): n is number => n !== undefined));
  // Each cluster may live outside the state folder (a root that the postgres user cannot enter): its
  // pointer file says where. The single profile's one, and the cluster profile's pair.
  const rootOf = (pointer: string, fallback: string) => {
    try {
      return readFileSync(`${stateDir}/${pointer}`, 'utf8').trim() || fallback;
    } catch {
      return fallback;
    }
  };
  const roots = [rootOf('postgres-root', `${stateDir}/postgres`), rootOf('postgres-ha/a-root', `${stateDir}/postgres-ha/a`), rootOf('postgres-ha/b-root', `${stateDir}/postgres-ha/b`)];
  const postmasters = new Set(roots.map((root) => pid(`${root}/data/postmaster.pid`)).filter((n): n is number => n !== undefined));
  const proxy = pid(`${stateDir}/pids/pg-proxy.pid`);
  if (javaPids.size === 0 && postmasters.size === 0) return undefined;
  return { javaPids, ...(postmasters.size ? { postmasters } : {}), ...(proxy !== undefined ? { proxy } : {}) };
}

/** Which part of the stack a process is, by its comm and command line (and, with a scope, whether it is the measured stack's). */
export function classifyProcess(comm: string, cmdline: string, pid: number, self: number, children: ReadonlyMap<number, string> = new Map(), scope?: StackScope, ppid?: number): string {
  if (pid === self) return 'benchNode';
  const child = children.get(pid);
  if (child) return child;
  if (comm === 'postgres' || comm.startsWith('postgres')) {
    if (scope?.postmasters && !scope.postmasters.has(pid) && !(ppid !== undefined && scope.postmasters.has(ppid))) return 'other';
    return 'postgres';
  }
  if (scope?.proxy === pid) return 'postgres';
  if (comm === 'java' || cmdline.includes('/bin/java')) {
    if (scope && scope.javaPids.size > 0 && !scope.javaPids.has(pid)) return 'other';
    if (/ConnectDistributed/.test(cmdline)) return 'connect';
    if (/quarkus|apicurio|schema-registry|SchemaRegistry/i.test(cmdline)) return 'registry';
    if (/kafka\.Kafka\b|kafka-server|kafka\.server/.test(cmdline)) return 'kafka';
    return 'java';
  }
  if (comm === 'node' || comm.startsWith('node') || comm === 'MainThread') return 'otherNode';
  return 'other';
}

const cmdlines = new Map<number, { comm: string; group: string }>();

/** The processes the bench spawned, by pid, and the group each counts in (`router`, `relay`, `writer`). */
export const childPids = new Map<number, string>();

/** The stack being measured (set by the bench at its start); see StackScope. */
let scope: StackScope | undefined;
export function setStackScope(s: StackScope | undefined): void {
  scope = s;
  cmdlines.clear();
}

export function sampleProcs(): ProcSample {
  const at = Date.now();
  const procs = new Map<number, { group: string; ticks: number }>();
  let machine = { busy: 0, total: 0 };
  try {
    machine = parseMachineStat(readFileSync('/proc/stat', 'utf8'));
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const pid = Number(entry);
      try {
        const stat = parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
        if (!stat) continue;
        let known = cmdlines.get(pid);
        // A child registered after its first sample is re-classified.
        if (!known || known.comm !== stat.comm || (childPids.has(pid) && known.group !== childPids.get(pid))) {
          let cmdline = '';
          try {
            cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
          } catch {
            // gone already
          }
          known = { comm: stat.comm, group: classifyProcess(stat.comm, cmdline, pid, process.pid, childPids, scope, stat.ppid) };
          cmdlines.set(pid, known);
        }
        procs.set(pid, { group: known.group, ticks: stat.ticks });
      } catch {
        // The process ended between readdir and read.
      }
    }
  } catch {
    // Not Linux: no samples.
  }
  return { at, machine, procs };
}

/** Ticks per group between two samples (processes born in between count from zero). */
export function cpuBetween(a: ProcSample, b: ProcSample, raw: true): Record<string, number>;
/** CPU between two samples, per group, in % of one core. */
export function cpuBetween(a: ProcSample, b: ProcSample): { seconds: number; machineBusyPct: number; cpuPct: Record<string, number> };
export function cpuBetween(a: ProcSample, b: ProcSample, raw?: true): Record<string, number> | { seconds: number; machineBusyPct: number; cpuPct: Record<string, number> } {
  const byGroup: Record<string, number> = {};
  for (const [pid, now] of b.procs) {
    const before = a.procs.get(pid)?.ticks ?? 0;
    byGroup[now.group] = (byGroup[now.group] ?? 0) + Math.max(0, now.ticks - before);
  }
  if (raw) return byGroup;
  const acc = new Accumulator(a);
  acc.add(b);
  return acc.result();
}

/** A window over which CPU and database transactions are measured; `end()` returns the Load. */
export interface LoadWindow {
  end(): Promise<Load>;
}

export async function dbXacts(admin: Client | undefined, database: string | undefined): Promise<number | undefined> {
  if (!admin || !database) return undefined;
  try {
    const { rows } = await admin.query<{ x: string }>('SELECT xact_commit + xact_rollback AS x FROM pg_stat_database WHERE datname = $1', [database]);
    return rows[0] ? Number(rows[0].x) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Starts a window. /proc is sampled every second and per-process deltas are summed, so a process that
 * exits inside the window (a child router, its backends) still counts up to its last sample.
 * pg_stat_database is flushed by each backend at most once a second while it is busy, so the
 * transaction rate is exact only to about a second's worth at each end: windows are several seconds
 * and, where the bench can, lie inside steady load, so the unflushed share is similar at both ends.
 */
export async function startLoad(admin?: Client, database?: string): Promise<LoadWindow> {
  const x0 = await dbXacts(admin, database);
  const first = sampleProcs();
  const acc = new Accumulator(first);
  const timer = setInterval(() => acc.add(sampleProcs()), 1000);
  timer.unref();
  return {
    async end() {
      clearInterval(timer);
      acc.add(sampleProcs());
      const x1 = await dbXacts(admin, database);
      const cpu = acc.result();
      const load: Load = { seconds: cpu.seconds, cores: cpus().length, machineBusyPct: cpu.machineBusyPct, cpuPct: cpu.cpuPct };
      if (x0 !== undefined && x1 !== undefined) load.dbXactPerSec = round((x1 - x0) / cpu.seconds);
      return load;
    },
  };
}

/** Sums per-group CPU ticks over consecutive samples. */
export class Accumulator {
  private readonly first: ProcSample;
  private last: ProcSample;
  private readonly ticks: Record<string, number> = {};

  constructor(first: ProcSample) {
    this.first = first;
    this.last = first;
  }

  add(sample: ProcSample): void {
    const d = cpuBetween(this.last, sample, true);
    for (const [group, t] of Object.entries(d)) this.ticks[group] = (this.ticks[group] ?? 0) + t;
    this.last = sample;
  }

  result(): { seconds: number; machineBusyPct: number; cpuPct: Record<string, number> } {
    const seconds = Math.max(0.001, (this.last.at - this.first.at) / 1000);
    const cpuPct: Record<string, number> = {};
    for (const [group, t] of Object.entries(this.ticks)) cpuPct[group] = round((t / TICKS_PER_SECOND / seconds) * 100);
    const total = this.last.machine.total - this.first.machine.total;
    const machineBusyPct = total > 0 ? round(((this.last.machine.busy - this.first.machine.busy) / total) * cpus().length * 100) : 0;
    return { seconds: round(seconds, 2), machineBusyPct, cpuPct };
  }
}

/** PSS (proportional set size: shared pages split between their users) of the stack's processes, in MiB. */
export function stackMemoryMb(): { totalMb: number; byGroup: Record<string, number> } {
  const byGroup: Record<string, number> = {};
  const sample = sampleProcs();
  for (const [pid, { group }] of sample.procs) {
    if (!['postgres', 'connect', 'kafka', 'registry', 'java'].includes(group)) continue;
    try {
      const match = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
      if (match) byGroup[group] = (byGroup[group] ?? 0) + Number(match[1]) / 1024;
    } catch {
      // gone, or not readable
    }
  }
  for (const k of Object.keys(byGroup)) byGroup[k] = round(byGroup[k] as number);
  return { totalMb: round(Object.values(byGroup).reduce((a, b) => a + b, 0)), byGroup };
}

/** Groups that are not the pipeline: whatever else runs on the machine (other tests, builds, editors). */
export const NOT_PIPELINE = new Set(['other', 'otherNode']);

/**
 * The groups counted as the pipeline's cost at rest and at 200 events/s: the stack, the router, the relay
 * and the watchdog. The writer is the application's own work, the bench only measures. Pure.
 */
export function inPipelineAtRest(group: string): boolean {
  return !NOT_PIPELINE.has(group) && group !== 'benchNode' && group !== 'writer';
}

/** The pipeline's CPU per event: every group but NOT_PIPELINE. Pure. */
export function pipelineCpuPerEvent(perEvent: Record<string, number>): number {
  return round(Object.entries(perEvent).reduce((sum, [group, v]) => sum + (NOT_PIPELINE.has(group) ? 0 : v), 0));
}

/**
 * CPU microseconds per event of each process group over a window: its CPU time (cpuPct × seconds) ÷
 * the events handled in that window. Pure; an empty window gives {}.
 */
export function cpuPerEvent(load: Pick<Load, 'seconds' | 'cpuPct'>, events: number): Record<string, number> {
  if (!(events > 0)) return {};
  const out: Record<string, number> = {};
  for (const [group, pct] of Object.entries(load.cpuPct)) out[group] = round(((pct / 100) * load.seconds * 1e6) / events);
  return out;
}
