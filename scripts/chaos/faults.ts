import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import type { Pool } from 'pg';
import type { Logger } from 'outbox-router/log';
import { sleep } from 'outbox-router/retry';
import type { OutboxConfig } from 'outbox-router/config';
import { failoverNote } from '../stack/cluster-postgres';
import { waitFailoverReady } from '../stack/postgres-ha';
import type { ServiceName, Stack } from '../stack/stack';
import { activeController, brokerLeading, brokerService, workerRunningTask } from './cluster-faults';
import { measureRecovery } from './checks';
import type { WriteState } from './writers';
import type { ChaosOptions, FaultKind, FaultRecord, Pipeline } from './types';

/** Every fault kind, in the order --help lists them: the single-node stack's, then the cluster profile's. */
export const FAULT_KINDS: readonly FaultKind[] = [
  'kill-router', 'kill-connect', 'kill-relay', 'restart-kafka', 'kill-kafka', 'restart-postgres', 'kill-postgres',
  'kill-kafka-leader', 'kill-kafka-controller', 'kill-connect-worker', 'failover-postgres',
];

/** The faults that need the cluster profile (three brokers, two workers, a primary with a standby). */
export const CLUSTER_FAULT_KINDS: readonly FaultKind[] = ['kill-kafka-leader', 'kill-kafka-controller', 'kill-connect-worker', 'failover-postgres'];

/**
 * The plan, each fault at its share of the profile's events.
 * - single-node stack: a router killed three times (the two instances in turn, the other one keeps
 *   running), Connect (or the relay) killed twice, Kafka and PostgreSQL each stopped gracefully once and
 *   killed once (SIGKILL of the broker, of the postmaster).
 * - cluster profile: the routers as above; SIGKILL of the broker leading most of the routed topic's
 *   partitions, later of the active KRaft controller; SIGKILL of the Connect worker running the task
 *   (CDC; the relay is killed instead), twice; and the primary failover twice (a → b, then b → a: the
 *   rebuilt old primary must carry the second one). A killed node comes back only after recovery was
 *   measured, so the recovery is the survivors' work.
 */
export function faultPlan(pipeline: Pipeline, topology: 'single' | 'cluster' = 'single'): Array<{ at: number; kind: FaultKind }> {
  if (topology === 'cluster') {
    const killCdc: FaultKind = pipeline === 'cdc' ? 'kill-connect-worker' : 'kill-relay';
    return [
      { at: 0.05, kind: 'kill-router' },
      { at: 0.12, kind: 'kill-kafka-leader' },
      { at: 0.2, kind: killCdc },
      { at: 0.3, kind: 'failover-postgres' },
      { at: 0.4, kind: 'kill-router' },
      { at: 0.5, kind: 'kill-kafka-controller' },
      { at: 0.6, kind: 'failover-postgres' },
      { at: 0.7, kind: killCdc },
      { at: 0.8, kind: 'kill-router' },
    ];
  }
  const killCdc: FaultKind = pipeline === 'cdc' ? 'kill-connect' : 'kill-relay';
  return [
    { at: 0.05, kind: 'kill-router' },
    { at: 0.12, kind: killCdc },
    { at: 0.2, kind: 'restart-kafka' },
    { at: 0.3, kind: 'kill-postgres' },
    { at: 0.4, kind: 'kill-router' },
    { at: 0.5, kind: 'kill-kafka' },
    { at: 0.6, kind: 'restart-postgres' },
    { at: 0.7, kind: killCdc },
    { at: 0.8, kind: 'kill-router' },
  ];
}

/** The running routers (router-a, router-b, …) and relay; a killed one is replaced here. */
export interface Parts {
  routers: ChildProcess[];
  relay: ChildProcess | undefined;
}

export interface FaultContext {
  stack: Stack;
  /** The run's configuration and routed topic: the cluster faults look up their victims with them. */
  config: OutboxConfig;
  topic: string;
  log: Logger;
  say: (line: string) => void;
  parts: Parts;
  spawnRouter: (index: number) => ChildProcess;
  spawnRelay: () => ChildProcess;
}

export const routerName = (index: number) => `router-${String.fromCharCode(97 + index)}`;

/** Faults, in order, each at its share of the events; each waits for recovery from the one before. */
export async function injectFaults(options: ChaosOptions, pool: Pool, state: WriteState, ctx: FaultContext): Promise<FaultRecord[]> {
  const { pipeline, profile } = options;
  const faults: FaultRecord[] = [];
  let routerKills = 0;
  for (const { at, kind } of faultPlan(pipeline, ctx.stack.profile).filter((f) => !options.only || options.only.includes(f.kind))) {
    while (state.attempted < profile.events * at && !state.done) await sleep(100);
    const record: FaultRecord = { kind, atCommitted: state.committed.size, recoveryMs: null, notes: [] };
    faults.push(record);
    ctx.say(`fault: ${kind} at ${state.committed.size} committed`);
    const { injectedAt, afterRecovery } = await injectFault(kind, record, ctx, kind === 'kill-router' ? routerKills++ : 0);
    // The next fault waits for recovery from this one, so each recovery time is its own.
    record.recoveryMs = await measureRecovery(pool, state, injectedAt, 180_000);
    ctx.say(`recovered from ${kind} in ${record.recoveryMs === null ? 'NOT WITHIN 180 s' : `${(record.recoveryMs / 1000).toFixed(1)} s`}${record.notes.length ? ` (${record.notes.join('; ')})` : ''}`);
    if (afterRecovery) await afterRecovery();
  }
  return faults;
}

/**
 * Injects one fault; returns when it took effect (a graceful stop takes a while: events committed before
 * it is down are no recovery), and what brings the victim back once recovery was measured (the cluster
 * faults: the survivors recover, then the node returns).
 */
async function injectFault(kind: FaultKind, record: FaultRecord, ctx: FaultContext, routerKill: number): Promise<{ injectedAt: number; afterRecovery?: () => Promise<void> }> {
  const { stack, log, parts } = ctx;
  let injectedAt = Date.now();
  if ((CLUSTER_FAULT_KINDS as readonly string[]).includes(kind)) return injectClusterFault(kind, record, ctx);
  if (kind === 'kill-router') {
    const index = routerKill % parts.routers.length;
    const victim = parts.routers[index] as ChildProcess;
    victim.kill('SIGKILL');
    await waitExit(victim);
    injectedAt = Date.now();
    parts.routers[index] = ctx.spawnRouter(index);
    const others = parts.routers.map((_, i) => routerName(i)).filter((_, i) => i !== index);
    record.notes.push(`${routerName(index)} killed and restarted${others.length ? `; ${others.join(', ')} kept running` : ''}`);
  } else if (kind === 'kill-relay') {
    parts.relay?.kill('SIGKILL');
    if (parts.relay) await waitExit(parts.relay);
    injectedAt = Date.now();
    parts.relay = ctx.spawnRelay();
  } else {
    const service = kind === 'kill-connect' ? 'connect' : kind.endsWith('kafka') ? 'kafka' : 'postgres';
    const kill = kind.startsWith('kill-');
    const pgLog = stack.logFile('postgres');
    const pgLogOffset = existsSync(pgLog) ? statSync(pgLog).size : 0;
    record.notes.push(`${service}: ${await stack.stopService(service, { kill })}`);
    injectedAt = Date.now();
    if (!kill) await sleep(2_000);
    await restartStack(stack, log);
    if (kind === 'kill-postgres') record.notes.push(crashRecoveryNote(pgLog, pgLogOffset));
  }
  return { injectedAt };
}

/** How long a failover fault waits for the connector's slot on the standby before the run fails. */
const SLOT_SYNC_WAIT_MS = 180_000;

/** A fault of the cluster profile: one broker, one worker or the primary, found on the live cluster. */
async function injectClusterFault(kind: FaultKind, record: FaultRecord, ctx: FaultContext): Promise<{ injectedAt: number; afterRecovery: () => Promise<void> }> {
  const { stack, log, config, topic } = ctx;
  if (stack.profile !== 'cluster') throw new Error(`chaos: the ${kind} fault needs the cluster profile (stack up --profile cluster); this stack runs ${stack.profile}`);
  const bringBack = (what: string) => async () => {
    const t = Date.now();
    await restartStack(stack, log);
    record.notes.push(`${what} back in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  };
  if (kind === 'failover-postgres') {
    // The fault is a survivable crash: one the HA manager fails over only once the connector's slot is on
    // the standby (a failover before that loses the slot, which no pipeline survives; the watchdog's
    // FailoverSlotNotReady and the deploy's SLOT_MISSING_AFTER_FAILOVER cover that case).
    const ready = await waitFailoverReady(stack.paths, [config.connector.slotName], SLOT_SYNC_WAIT_MS);
    if (ready.missing.length > 0) {
      throw new Error(`chaos: the standby still has no synced, persistent copy of slot ${ready.missing.join(', ')} after ${SLOT_SYNC_WAIT_MS / 1000} s; a failover now would lose it (read the standby's postgres.log for "could not synchronize replication slot")`);
    }
    record.notes.push(`slot ${config.connector.slotName} synced on the standby (waited ${(ready.waitedMs / 1000).toFixed(1)} s)`);
    const report = await stack.failoverPostgres();
    const injectedAt = Date.now() - (report.totalMs - report.killToPromotedMs);
    record.notes.push(failoverNote(report));
    return {
      injectedAt,
      afterRecovery: async () => {
        const rebuilt = await stack.rebuildStandby();
        record.notes.push(`node ${rebuilt.standby} back as the standby of node ${rebuilt.primary} (${rebuilt.method}) in ${(rebuilt.ms / 1000).toFixed(1)} s`);
      },
    };
  }
  let victim: ServiceName;
  if (kind === 'kill-kafka-leader') {
    const leader = await brokerLeading(stack, config, topic);
    victim = leader.service;
    record.notes.push(`${victim} (node ${leader.nodeId}) led ${leader.partitions} of ${leader.of} partitions`);
  } else if (kind === 'kill-kafka-controller') {
    const controller = activeController(stack.paths.stateDir);
    if (!controller) throw new Error('chaos: no KRaft quorum-state file names a leader');
    victim = await brokerService(stack, config, controller.nodeId);
    record.notes.push(`${victim} (node ${controller.nodeId}) was the active controller (epoch ${controller.epoch})`);
  } else {
    victim = await workerRunningTask(stack, config);
    record.notes.push(`${victim} ran the task`);
  }
  record.notes.push(`${victim}: ${await stack.stopService(victim, { kill: true })}`);
  const injectedAt = Date.now();
  return { injectedAt, afterRecovery: bringBack(victim) };
}


/** Did the restart after the kill run crash recovery? Read from the server log written since `offset`. */
export function crashRecoveryNote(logFile: string, offset: number): string {
  let text = '';
  try {
    text = readFileSync(logFile).subarray(offset).toString('utf8');
  } catch {
    return 'crash recovery: log not readable';
  }
  return crashRecoveryFrom(text);
}

/** Pure: what PostgreSQL's log says about crash recovery. */
export function crashRecoveryFrom(text: string): string {
  if (/not properly shut down; automatic recovery in progress/.test(text)) {
    const redo = /redo done at (\S+)/.exec(text);
    return `crash recovery ran${redo ? ` (redo done at ${redo[1]})` : ''}`;
  }
  return 'crash recovery NOT seen in the server log';
}

/** The process supervisor's part: start what was stopped (a few tries: a killed JVM may hold its port a moment). */
export async function restartStack(stack: Stack, log: Logger): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await stack.up((e) => log.debug(e.detail));
      return;
    } catch (error) {
      if (attempt >= 5) throw error;
      log.warn({ err: (error as Error).message, attempt }, 'chaos: stack up failed; trying again');
      await sleep(3_000);
    }
  }
}

export async function waitExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise((r) => child.once('exit', r));
}
