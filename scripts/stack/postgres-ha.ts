/**
 * The cluster profile's PostgreSQL: a primary and a streaming, synchronous standby of PostgreSQL 17
 * (zonky's server build from Maven Central, as the version matrix uses), with failover slots, behind a
 * TCP proxy on the stack's PostgreSQL address (pg-proxy.ts). Node a starts as primary on 55435, node b
 * as its standby on 55436; the proxy on 55432 forwards to whichever is primary.
 *
 * PostgreSQL 17 failover slots: a logical slot made with failover = true on the primary is copied to the
 * standby by its slot-sync worker (sync_replication_slots = on, hot_standby_feedback = on, a dbname in
 * primary_conninfo, a physical slot via primary_slot_name), and the primary holds logical decoding back
 * until that standby has the WAL (synchronized_standby_slots). A slot made without failover = true is not
 * copied: after a failover it is missing on the new primary. The standby's copy is usable (synced, not
 * temporary) only once the primary's slot has advanced past an xl_running_xacts record written after
 * the standby took its copy (the bgwriter writes one every 15 s of activity): a slot that is never
 * consumed after the standby appears stays temporary there, and a failover then loses it.
 *
 * The standby is seeded with PostgreSQL's backup API and a file copy, and a former primary is rebuilt
 * the same way: zonky's builds carry no pg_basebackup or pg_rewind (postgres-ha-nodes.ts, baseBackup).
 *
 * Roles are data, not settings files: standby.signal plus postgresql.auto.conf (ALTER SYSTEM), so a role
 * swap is a promotion and a few ALTER SYSTEM statements. The proxy's target file names the primary.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { OutboxError } from 'outbox-router/errors';
import type { StackPaths } from './paths';
import * as pg from './postgres';
import { HA_POSTGRES_VERSION, NODE_NAMES, peerOf, type HaRole, type NodeName } from './postgres-ha-config';
import { rebuildStandby, slotStates, type SlotState } from './postgres-ha-failover';
import {
  alterRole, currentPrimary, ensurePhysicalSlot, ensureServer, haContext, hasData, nodePort, nodeRunning, proxyPid, renderNodeConf,
  replicationOf, startNode, startProxy, stopProxy, waitStreaming, withNode, writeRole, type HaOptions, type HaStep,
} from './postgres-ha-nodes';
import { treeRssBytes } from './processes';

export { failover, rebuildStandby, waitFailoverReady, type FailoverReport, type RebuildReport, type SlotState } from './postgres-ha-failover';
export { haContext, switchProxy, type HaContext, type HaOptions, type HaStep } from './postgres-ha-nodes';
export { HA_PORTS, HA_POSTGRES_VERSION, type HaPorts, type NodeName } from './postgres-ha-config';

/**
 * Starts the pair and its proxy; idempotent (what runs is left alone). From scratch: downloads and
 * unpacks PostgreSQL 17 (cached), initdb of node a as primary with the stack's superuser, the `app` and
 * registry databases, pg_basebackup of node b as its standby. Returns once the standby streams as the
 * synchronous standby and the proxy forwards to the primary.
 */
export async function upPair(paths: StackPaths, onStep: (step: HaStep) => void = () => {}, options: HaOptions = {}): Promise<string> {
  const started = Date.now();
  const timed = async <T>(step: string, work: () => T | Promise<T>, detail: (result: T) => string): Promise<T> => {
    const t = Date.now();
    const result = await work();
    onStep({ step, ms: Date.now() - t, detail: detail(result) });
    return result;
  };
  const ctx = haContext(paths, options);
  await timed('postgres-ha', () => ensureServer(ctx), () => `PostgreSQL ${HA_POSTGRES_VERSION} server in ${ctx.root}/server`);
  const primary = currentPrimary(ctx);
  const standby = peerOf(primary);
  if (!hasData(ctx, primary) && hasData(ctx, standby)) {
    throw new OutboxError('STACK_SERVICE_FAILED', `The pair's primary is node ${primary} (${ctx.targetFile}), but only node ${standby} has data. Remove the pair with downPair({ clean: true }) and start it again.`, { details: { service: 'postgres' } });
  }
  await timed(`node ${primary}`, async () => {
    if (nodeRunning(ctx, primary)) return 'running';
    const created = renderNodeConf(ctx, primary);
    // A new primary waits for no standby until its standby streams (CREATE DATABASE would block).
    if (created) writeRole(ctx, primary, 'primary', false);
    await startNode(ctx, primary);
    return created ? 'new cluster, started' : 'started';
  }, (what) => `primary on 127.0.0.1:${nodePort(ctx, primary)}: ${what}`);
  await pg.ensureAppDatabase(nodePort(ctx, primary));
  await ensurePhysicalSlot(ctx, primary, standby);
  const replication = nodeRunning(ctx, standby) ? await replicationOf(ctx, primary, standby).catch(() => undefined) : undefined;
  if (replication?.state === 'streaming') {
    if (replication.syncState !== 'sync') await alterRole(ctx, primary, 'primary', true);
    await waitStreaming(ctx, primary, standby, true);
  } else {
    await rebuildStandby(paths, onStep, options);
  }
  await timed('pg-proxy', () => startProxy(ctx, primary), () => `127.0.0.1:${ctx.ports.proxy} -> node ${primary}`);
  return `PostgreSQL ${HA_POSTGRES_VERSION} pair: primary node ${primary} (${nodePort(ctx, primary)}), synchronous standby node ${standby} (${nodePort(ctx, standby)}), proxy 127.0.0.1:${ctx.ports.proxy} (${((Date.now() - started) / 1000).toFixed(1)} s)`;
}

/** Stops the proxy and both nodes (the primary first, so its standby receives the shutdown checkpoint); `clean` removes their data. */
export async function downPair(paths: StackPaths, { clean = false }: { clean?: boolean } = {}, onStep: (step: HaStep) => void = () => {}, options: HaOptions = {}): Promise<void> {
  const ctx = haContext(paths, options);
  let t = Date.now();
  onStep({ step: 'pg-proxy', ms: Date.now() - t, detail: (await stopProxy(ctx)) ? 'stopped' : 'not running' });
  const primary = currentPrimary(ctx);
  for (const name of [primary, peerOf(primary)]) {
    t = Date.now();
    const stopped = nodeRunning(ctx, name) && pg.stopPostgres(ctx.install, ctx.layouts[name]);
    onStep({ step: `node ${name}`, ms: Date.now() - t, detail: stopped ? 'stopped' : 'not running' });
  }
  if (clean) {
    rmSync(ctx.root, { recursive: true, force: true });
    rmSync(join(paths.stateDir, 'postgres-ha'), { recursive: true, force: true });
    onStep({ step: 'clean', ms: 0, detail: `removed ${ctx.root}` });
  }
}

export interface NodeStatus {
  name: NodeName;
  role: HaRole | 'down';
  port: number;
  pid?: number;
  rssBytes: number;
  /** Standby: the last WAL position replayed, and how far the primary is ahead (bytes). */
  replayLsn?: string | null;
  lagBytes?: number | null;
  /** Standby: synchronous or async, as its primary sees it. */
  syncState?: string;
  /** Logical slots (on a standby: the synced ones). */
  slots?: SlotState[];
}

export interface PairStatus {
  nodes: NodeStatus[];
  proxy: { port: number; pid?: number; rssBytes: number; target: NodeName };
}

export async function pairStatus(paths: StackPaths, options: HaOptions = {}): Promise<PairStatus> {
  const ctx = haContext(paths, options);
  const primary = currentPrimary(ctx);
  const nodes: NodeStatus[] = [];
  for (const name of NODE_NAMES) {
    const pid = nodeRunning(ctx, name) ? pg.postgresPid(ctx.layouts[name]) : undefined;
    const base = { name, port: nodePort(ctx, name), pid, rssBytes: pid === undefined ? 0 : treeRssBytes(pid) };
    const recovery = pid === undefined ? undefined : await withNode(ctx, name, async (c) => (await c.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r')).rows[0]?.r).catch(() => undefined);
    if (recovery === undefined) {
      nodes.push({ ...base, role: 'down' });
      continue;
    }
    const slots = (await slotStates(ctx, name)).filter((s) => s.slot_type === 'logical');
    if (!recovery) {
      nodes.push({ ...base, role: 'primary', slots });
      continue;
    }
    const replayLsn = await withNode(ctx, name, async (c) => (await c.query<{ lsn: string | null }>('SELECT pg_last_wal_replay_lsn()::text AS lsn')).rows[0]?.lsn ?? null);
    const seen = await replicationOf(ctx, peerOf(name), name).catch(() => undefined);
    nodes.push({ ...base, role: 'standby', replayLsn, lagBytes: seen?.lagBytes ?? null, syncState: seen?.syncState ?? 'not connected', slots });
  }
  const proxy = proxyPid(ctx);
  return { nodes, proxy: { port: ctx.ports.proxy, pid: proxy, rssBytes: proxy === undefined ? 0 : treeRssBytes(proxy), target: primary } };
}

/**
 * Stops one node, for fault injection: `kill` is SIGKILL of its postmaster (a crash; see killPostgres),
 * otherwise a fast shutdown. While the standby is down the primary's commits wait for it (synchronous
 * replication): that is the price of losing no acknowledged commit. upPair() starts it again.
 */
export async function stopNode(paths: StackPaths, name: NodeName, { kill = false }: { kill?: boolean } = {}, options: HaOptions = {}): Promise<'stopped' | 'killed' | 'not running'> {
  const ctx = haContext(paths, options);
  if (!nodeRunning(ctx, name)) return 'not running';
  if (kill) return (await pg.killPostgres(ctx.layouts[name])) ? 'killed' : 'not running';
  return pg.stopPostgres(ctx.install, ctx.layouts[name]) ? 'stopped' : 'not running';
}
