import { spawn, spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { OutboxError } from 'outbox-router/errors';

export interface DetachedProcess {
  command: string;
  args: readonly string[];
  logFile: string;
  pidFile: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

/** Starts a process that outlives this one (its own session), output appended to `logFile`. */
export function spawnDetached(spec: DetachedProcess): number {
  mkdirSync(dirname(spec.logFile), { recursive: true });
  mkdirSync(dirname(spec.pidFile), { recursive: true });
  const fd = openSync(spec.logFile, 'a');
  try {
    const child = spawn(spec.command, spec.args as string[], {
      cwd: spec.cwd,
      env: spec.env ?? process.env,
      detached: true,
      stdio: ['ignore', fd, fd],
    });
    // Without a listener, a failed spawn (ENOENT, EACCES) is an unhandled 'error' event that kills us
    // on the next tick, before the caller can report anything.
    child.once('error', () => {});
    if (child.pid === undefined) {
      throw new OutboxError('STACK_SERVICE_FAILED', `Could not start ${spec.command}: it does not exist or is not executable. Check the path (and JAVA_HOME).`);
    }
    child.unref();
    writeFileSync(spec.pidFile, `${child.pid}\n`);
    return child.pid;
  } finally {
    closeSync(fd);
  }
}

export function readPid(pidFile: string): number | undefined {
  if (!existsSync(pidFile)) return undefined;
  const pid = Number.parseInt(readFileSync(pidFile, 'utf8').split('\n')[0] ?? '', 10);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  // A zombie (exited, not yet reaped by its parent) still answers kill 0.
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
}

/**
 * The pid in `pidFile`, if that process is alive *and* its command line carries `marker`: a pid file
 * left by a crash may name a pid the OS has since given to an unrelated process, which we must not kill.
 */
export function ownedPid(pidFile: string, marker: string): number | undefined {
  const pid = readPid(pidFile);
  if (pid === undefined || !isAlive(pid)) return undefined;
  return commandLine(pid).includes(marker) ? pid : undefined;
}

/** Live processes whose command line contains every one of `needles` (a pid-file-free lookup). */
export function findProcesses(...needles: string[]): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const cmd = commandLine(Number(entry));
    if (cmd && needles.every((n) => cmd.includes(n)) && isAlive(Number(entry))) found.push(Number(entry));
  }
  return found;
}

/** SIGTERM, then SIGKILL after `graceMs`. Resolves once the process is gone. */
export async function stopProcess(pid: number, graceMs = 20_000): Promise<'stopped' | 'killed' | 'absent'> {
  if (!isAlive(pid)) return 'absent';
  signal(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return 'stopped';
    await sleep(100);
  }
  signal(pid, 'SIGKILL');
  while (isAlive(pid)) await sleep(50);
  return 'killed';
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

export function removeFile(path: string): void {
  rmSync(path, { force: true });
}

/** The direct children of `pid` (from /proc). */
export function childPidsOf(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) found.push(Number(entry));
    } catch {
      // the process ended while we were reading /proc
    }
  }
  return found;
}

/** Resident memory of a process and all its descendants (PostgreSQL is one process per connection). */
export function treeRssBytes(rootPid: number): number {
  const children = new Map<number, number[]>();
  const rss = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ppid = Number(fields[1]);
      const pages = Number(fields[21]);
      const pid = Number(entry);
      rss.set(pid, pages * 4096);
      children.set(ppid, [...(children.get(ppid) ?? []), pid]);
    } catch {
      // the process ended while we were reading /proc
    }
  }
  let total = 0;
  const stack = [rootPid];
  while (stack.length > 0) {
    const pid = stack.pop() as number;
    total += rss.get(pid) ?? 0;
    stack.push(...(children.get(pid) ?? []));
  }
  return total;
}

export function tailLines(path: string, lines: number): string[] {
  if (!existsSync(path)) return [];
  const text = readFileSync(path, 'utf8');
  const all = text.split('\n');
  if (all[all.length - 1] === '') all.pop();
  return lines > 0 ? all.slice(-lines) : [];
}

/** True when something already accepts connections or holds the address `host:port`. */
export function portInUse(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'EADDRINUSE' || error.code === 'EACCES'));
    server.once('listening', () => server.close(() => resolve(false)));
    server.listen({ port, host, exclusive: true });
  });
}

export interface RunResult {
  status: number;
  output: string;
}

/** Runs a short command to completion, capturing stdout and stderr together. */
export function run(command: string, args: readonly string[], options: SpawnSyncOptions = {}): RunResult {
  const result = spawnSync(command, args as string[], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...options });
  if (result.error) {
    return { status: 127, output: String(result.error.message) };
  }
  return { status: result.status ?? 1, output: `${String(result.stdout ?? '')}${String(result.stderr ?? '')}` };
}

export function which(command: string): string | undefined {
  const result = run('sh', ['-c', `command -v ${command}`]);
  const path = result.output.trim();
  return result.status === 0 && path ? path : undefined;
}
