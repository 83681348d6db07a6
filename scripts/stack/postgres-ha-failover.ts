/**
 * The pair's two role changes: failover (the primary dies, the standby is promoted, the proxy moves) and
 * rebuildStandby (the other node comes back as the new primary's synchronous standby).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { OutboxError } from 'outbox-router/errors';
import type { StackPaths } from './paths';
import * as pg from './postgres';
import { peerOf, primaryConninfo, type NodeName } from './postgres-ha-config';
import {
  alterRole, baseBackup, currentPrimary, diskRole, ensurePhysicalSlot, haContext, hasData, nodePort, nodeRunning, replicationOf,
  startNode, switchProxy, waitSlotsSynced, waitStreaming, withNode, writeRole, type HaContext, type HaOptions, type HaStep,
} from './postgres-ha-nodes';

export interface SlotState {
  slot_name: string;
  slot_type: string;
  failover: boolean;
  synced: boolean;
  temporary: boolean;
  invalidation_reason: string | null;
  confirmed_flush_lsn: string | null;
  restart_lsn: string | null;
}

/** Every replication slot of a node (logical and physical), as pg_replication_slots shows it on PG 17. */
export async function slotStates(ctx: HaContext, name: NodeName): Promise<SlotState[]> {
  return withNode(ctx, name, async (client) => {
    const { rows } = await client.query<SlotState>(
      'SELECT slot_name, slot_type, failover, synced, temporary, invalidation_reason, confirmed_flush_lsn::text, restart_lsn::text FROM pg_replication_slots ORDER BY slot_name',
    );
    return rows;
  });
}

export interface FailoverReport {
  from: NodeName;
  to: NodeName;
  /** The old primary's pg_current_wal_lsn() and slots just before the kill (absent when it was already down). */
  primaryLsn?: string;
  primarySlots?: SlotState[];
  /** The standby before promotion: what it had received and replayed, and its (synced) slots. */
  standbyReceiveLsn: string | null;
  standbyReplayLsn: string | null;
  standbySlots: SlotState[];
  /** The new primary right after promotion: its LSN, timeline and slots. */
  promotedLsn: string;
  promotedTimeline: number;
  promotedSlots: SlotState[];
  killToPromotedMs: number;
  killToProxySwitchedMs: number;
  totalMs: number;
}

/**
 * Kills (SIGKILL, or with `kill: false` a fast shutdown) the primary, promotes the standby, points the
 * proxy at it, and relaxes the new primary's synchronous settings: it has no standby yet, and a primary
 * waiting for a missing synchronous standby blocks every commit (synchronous_standby_names) and every
 * logical walsender (synchronized_standby_slots). rebuildStandby() restores them.
 */
export async function failover(paths: StackPaths, { kill = true }: { kill?: boolean } = {}, onStep: (step: HaStep) => void = () => {}, options: HaOptions = {}): Promise<FailoverReport> {
  const ctx = haContext(paths, options);
  const from = currentPrimary(ctx);
  const to = peerOf(from);
  if (!nodeRunning(ctx, to)) {
    throw new OutboxError('STACK_SERVICE_FAILED', `Cannot fail over to node ${to}: it is not running. Start the pair with upPair(), or rebuild the standby with rebuildStandby().`, { details: { service: 'postgres' } });
  }
  const started = Date.now();
  let primaryLsn: string | undefined;
  let primarySlots: SlotState[] | undefined;
  try {
    primaryLsn = await withNode(ctx, from, async (c) => (await c.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]?.lsn);
    primarySlots = await slotStates(ctx, from);
  } catch {
    // the primary is already down: nothing to record
  }
  let killedAt = Date.now();
  let exited = (): void => {};
  const gone = new Promise<void>((resolve) => (exited = resolve));
  // Promotion starts once the old primary's processes have exited; their reaping is waited for at the end.
  const killing = kill ? pg.killPostgres(ctx.layouts[from], { onKilled: () => (killedAt = Date.now()), onExited: exited }) : Promise.resolve(pg.stopPostgres(ctx.install, ctx.layouts[from]));
  const ran = await Promise.race([gone.then(() => true), killing]);
  onStep({ step: `node ${from}`, ms: Date.now() - killedAt, detail: !ran ? 'was not running' : kill ? 'killed (SIGKILL)' : 'stopped' });

  const before = await withNode(ctx, to, async (c) =>
    (await c.query<{ receive: string | null; replay: string | null }>('SELECT pg_last_wal_receive_lsn()::text AS receive, pg_last_wal_replay_lsn()::text AS replay')).rows[0],
  );
  const standbySlots = await slotStates(ctx, to);
  const promoted = await withNode(ctx, to, async (c) => (await c.query<{ ok: boolean }>('SELECT pg_promote(true, 60) AS ok')).rows[0]?.ok);
  if (!promoted) throw new OutboxError('STACK_SERVICE_FAILED', `Node ${to} was not promoted within 60 s. Read ${ctx.layouts[to].logFile}.`, { details: { service: 'postgres', log: ctx.layouts[to].logFile } });
  const killToPromotedMs = Date.now() - killedAt;
  onStep({ step: `node ${to}`, ms: killToPromotedMs, detail: 'promoted' });

  await alterRole(ctx, to, 'primary', false);
  await switchProxy(ctx, to);
  const killToProxySwitchedMs = Date.now() - killedAt;
  onStep({ step: 'proxy', ms: killToProxySwitchedMs, detail: `-> node ${to} (port ${nodePort(ctx, to)})` });

  const after = await withNode(ctx, to, async (c) =>
    (await c.query<{ lsn: string; tli: number }>('SELECT pg_current_wal_lsn()::text AS lsn, timeline_id AS tli FROM pg_control_checkpoint()')).rows[0],
  );
  await killing;
  return {
    from,
    to,
    primaryLsn,
    primarySlots,
    standbyReceiveLsn: before?.receive ?? null,
    standbyReplayLsn: before?.replay ?? null,
    standbySlots,
    promotedLsn: after?.lsn ?? '',
    // pg_control_checkpoint() shows the promotion's timeline only after its checkpoint: it may lag by one.
    promotedTimeline: after?.tli ?? 0,
    promotedSlots: await slotStates(ctx, to),
    killToPromotedMs,
    killToProxySwitchedMs,
    totalMs: Date.now() - started,
  };
}

/**
 * Waits until the standby holds a synchronized, persistent copy of each named failover slot that exists on
 * the primary (a name with no failover slot there is not waited for). A failover before that loses the
 * slot: its consumer (Debezium) then refuses its stored offset for good. PostgreSQL 17 keeps a new slot's
 * copy temporary until the slot's consumer moves it past what the standby can decode, which takes as long
 * as its first confirmations. Returns the slots still missing when `timeoutMs` ran out, and the wait.
 */
export async function waitFailoverReady(paths: StackPaths, slotNames: readonly string[], timeoutMs: number, options: HaOptions = {}): Promise<{ missing: string[]; waitedMs: number }> {
  const ctx = haContext(paths, options);
  const primary = currentPrimary(ctx);
  const started = Date.now();
  const missing = await waitSlotsSynced(ctx, primary, peerOf(primary), timeoutMs, slotNames);
  return { missing, waitedMs: Date.now() - started };
}

export interface RebuildReport {
  primary: NodeName;
  standby: NodeName;
  /** none: it already streamed; restart: its folder already was a standby's; rewind / basebackup (a fresh copy): rebuilt. */
  method: 'none' | 'restart' | 'rewind' | 'basebackup';
  /** pg_rewind's last words, when it was tried and failed (then pg_basebackup ran). */
  rewindFailure?: string;
  /** Failover slots the standby still had no synchronized copy of when the wait gave up (waitSlotsSynced). */
  slotsNotSynced?: string[];
  ms: number;
}

/**
 * Brings the node that is not the primary back as its synchronous standby. A former primary must first
 * lose what the new one never received: pg_rewind would do that (wal_log_hints = on allows it; it crash-
 * recovers a killed target itself), but zonky's server builds do not ship it, so it is used only when
 * present, and otherwise the folder is replaced by a fresh copy of the primary (baseBackup). Once it streams, the primary
 * waits for it again (synchronous_standby_names, synchronized_standby_slots).
 */
export async function rebuildStandby(paths: StackPaths, onStep: (step: HaStep) => void = () => {}, options: HaOptions = {}): Promise<RebuildReport> {
  const started = Date.now();
  const ctx = haContext(paths, options);
  const primary = currentPrimary(ctx);
  const standby = peerOf(primary);
  const done = async (method: RebuildReport['method'], rewindFailure?: string): Promise<RebuildReport> => {
    await waitStreaming(ctx, primary, standby, false);
    await alterRole(ctx, primary, 'primary', true);
    await waitStreaming(ctx, primary, standby, true);
    // A failover before the slots are synced would lose them: ready means ready to fail over.
    const notSynced = await waitSlotsSynced(ctx, primary, standby, options.slotSyncWaitMs);
    const report = { primary, standby, method, ...(rewindFailure ? { rewindFailure } : {}), ...(notSynced.length ? { slotsNotSynced: notSynced } : {}), ms: Date.now() - started };
    onStep({ step: `node ${standby}`, ms: report.ms, detail: `standby of node ${primary} (${method}), synchronous${notSynced.length ? `; failover slots not yet synced: ${notSynced.join(', ')}` : ', failover slots synced'}` });
    return report;
  };

  if (nodeRunning(ctx, standby)) {
    if (diskRole(ctx, standby) === 'standby' && (await replicationOf(ctx, primary, standby).catch(() => undefined))?.state === 'streaming') return done('none');
    // A second primary (a failover while it was away, then started by hand): never let it take writes.
    pg.stopPostgres(ctx.install, ctx.layouts[standby]);
  }
  await ensurePhysicalSlot(ctx, primary, standby);
  let method: RebuildReport['method'];
  let rewindFailure: string | undefined;
  if (hasData(ctx, standby) && diskRole(ctx, standby) === 'standby') {
    method = 'restart';
  } else if (hasData(ctx, standby) && existsSync(join(ctx.install.binDir, 'pg_rewind'))) {
    rewindFailure = await rewind(ctx, primary, standby);
    method = rewindFailure === undefined ? 'rewind' : 'basebackup';
  } else {
    method = 'basebackup';
  }
  if (method === 'basebackup') await baseBackup(ctx, primary, standby);
  onStep({ step: `node ${standby}`, ms: Date.now() - started, detail: method });
  writeRole(ctx, standby, 'standby');
  await startNode(ctx, standby);
  return done(method, rewindFailure);
}

/** pg_rewind of the former primary onto the current one; returns why it failed, or undefined. */
async function rewind(ctx: HaContext, primary: NodeName, standby: NodeName): Promise<string | undefined> {
  // pg_rewind reads the source's timeline from its control file, which a promotion updates only at its
  // next checkpoint: without one it sees the same timeline and rewinds nothing.
  await withNode(ctx, primary, (c) => c.query('CHECKPOINT'));
  const result = pg.runAsOwner(join(ctx.install.binDir, 'pg_rewind'), [
    '--target-pgdata', ctx.layouts[standby].dataDir,
    '--source-server', primaryConninfo(standby, nodePort(ctx, primary), ctx.passfile),
  ]);
  return result.status === 0 ? undefined : result.output.trim().split('\n').slice(-3).join(' ');
}
