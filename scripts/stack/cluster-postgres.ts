/**
 * The cluster profile's PostgreSQL as the stack sees it: the primary + standby pair of postgres-ha.ts
 * behind its proxy, shown as three services (`postgres`: the proxy on the stack's address, which every
 * client uses; `postgres-a` and `postgres-b`: the nodes, with their current roles), stopped one node at
 * a time for fault injection, and failed over.
 */
import { existsSync } from 'node:fs';
import type { StackPaths } from './paths';
import { downPair, failover, haContext, pairStatus, rebuildStandby, stopNode, upPair, type FailoverReport, type NodeName, type RebuildReport } from './postgres-ha';
import { proxyPid } from './postgres-ha-nodes';
import { describeFailure, probePostgres } from './probes';
import { treeRssBytes } from './processes';
import type { ClusterPostgresName, ServiceStatus } from './services';
import { STACK_PORTS } from './settings';

export type { ClusterPostgresName };
export const CLUSTER_POSTGRES_NAMES: readonly ClusterPostgresName[] = ['postgres-a', 'postgres-b'];

export const isClusterPostgresName = (name: string): name is ClusterPostgresName => (CLUSTER_POSTGRES_NAMES as readonly string[]).includes(name);

const nodeOf = (name: ClusterPostgresName): NodeName => (name === 'postgres-a' ? 'a' : 'b');

/** A row of `stack status`: the proxy, or a node. */
export type ClusterPostgresRow = ServiceStatus & { name: 'postgres' | ClusterPostgresName };

type Step = (event: { step: string; ms: number; detail: string }) => void;

/** `stack up`: the pair and its proxy (idempotent: a node that is down comes back as the standby). */
export async function upClusterPostgres(paths: StackPaths, onStep: Step): Promise<string> {
  const description = await upPair(paths, (s) => onStep({ ...s, step: `postgres ${s.step}` }));
  return `${await probePostgres()} through the proxy; ${description}`;
}

export async function downClusterPostgres(paths: StackPaths, clean: boolean, onStep: Step): Promise<void> {
  await downPair(paths, { clean }, (s) => onStep({ ...s, step: `postgres ${s.step}` }));
}

/** True when the pair's proxy (ours) holds the stack's PostgreSQL port. */
export function clusterProxyRunning(paths: StackPaths): boolean {
  return existsSync(paths.stateDir) && proxyPid(haContext(paths)) !== undefined;
}

export function clusterPostgresLog(paths: StackPaths, name: 'postgres' | ClusterPostgresName): string {
  const ctx = haContext(paths);
  if (name === 'postgres') return ctx.proxyLogFile;
  return ctx.layouts[nodeOf(name)].logFile;
}

/** SIGKILL (or a fast shutdown) of one node; `postgres` stands for the current primary. */
export async function stopClusterPostgres(paths: StackPaths, name: 'postgres' | ClusterPostgresName, kill: boolean): Promise<'stopped' | 'killed' | 'not running'> {
  const node = name === 'postgres' ? (await pairStatus(paths)).proxy.target : nodeOf(name);
  return stopNode(paths, node, { kill });
}

export const failoverClusterPostgres = (paths: StackPaths, onStep: Step = () => {}): Promise<FailoverReport> => failover(paths, { kill: true }, onStep);
export const rebuildClusterStandby = (paths: StackPaths, onStep: Step = () => {}): Promise<RebuildReport> => rebuildStandby(paths, onStep);

/** The proxy's row, then each node's: role, WAL position and lag, and the standby's synced slots. */
export async function clusterPostgresStatus(paths: StackPaths): Promise<ClusterPostgresRow[]> {
  const ctx = haContext(paths);
  let status;
  try {
    status = await pairStatus(paths);
  } catch (error) {
    return [{ name: 'postgres', ports: [STACK_PORTS.postgres], running: false, ready: false, detail: describeFailure(error), rssBytes: 0, logFile: ctx.proxyLogFile }];
  }
  const pid = status.proxy.pid;
  let proxy = { ready: false, detail: 'not running' };
  if (pid !== undefined) {
    try {
      proxy = { ready: true, detail: `proxy → node ${status.proxy.target}: ${await probePostgres()}` };
    } catch (error) {
      proxy = { ready: false, detail: `proxy → node ${status.proxy.target}: ${describeFailure(error)}` };
    }
  }
  const rows: ClusterPostgresRow[] = [
    { name: 'postgres', ports: [status.proxy.port], pid, running: pid !== undefined, ...proxy, rssBytes: pid === undefined ? 0 : treeRssBytes(pid), logFile: ctx.proxyLogFile },
  ];
  for (const node of status.nodes) {
    const slots = (node.slots ?? []).map((s) => `${s.slot_name}${node.role === 'standby' ? ` synced=${s.synced}${s.temporary ? ' temporary' : ''}` : ` failover=${s.failover}`}${s.invalidation_reason ? ` INVALIDATED ${s.invalidation_reason}` : ''}`);
    const detail =
      node.role === 'down'
        ? 'not running'
        : node.role === 'primary'
          ? `primary${slots.length ? `; slots ${slots.join(', ')}` : ''}`
          : `standby (${node.syncState ?? '?'}), replayed ${node.replayLsn ?? '?'}, ${node.lagBytes ?? '?'} bytes behind${slots.length ? `; slots ${slots.join(', ')}` : '; no synced slot'}`;
    rows.push({
      name: `postgres-${node.name}`,
      ports: [node.port],
      pid: node.pid,
      running: node.pid !== undefined,
      // A standby not streaming synchronously makes every commit wait (or, relaxed after a failover, risks loss): not ready.
      ready: node.role === 'primary' || (node.role === 'standby' && node.syncState === 'sync'),
      detail,
      rssBytes: node.rssBytes,
      logFile: ctx.layouts[node.name].logFile,
    });
  }
  return rows;
}

/** One line of a failover: the LSNs, the slot on the standby before promotion, the timings. */
export function failoverNote(report: FailoverReport): string {
  const logical = report.standbySlots.filter((s) => s.slot_type === 'logical');
  const slots = logical.length
    ? logical.map((s) => `${s.slot_name} synced=${s.synced} temporary=${s.temporary} confirmed_flush ${s.confirmed_flush_lsn ?? '-'}${s.invalidation_reason ? ` INVALIDATED (${s.invalidation_reason})` : ''}`).join(', ')
    : (report.primarySlots ?? []).some((s) => s.slot_type === 'logical')
      ? 'NO logical slot on the standby'
      : 'no logical slot on either node (a pipeline without one: the relay)';
  const primarySlot = (report.primarySlots ?? []).filter((s) => s.slot_type === 'logical').map((s) => `${s.slot_name} confirmed_flush ${s.confirmed_flush_lsn ?? '-'}`).join(', ');
  return (
    `failover ${report.from} → ${report.to}: primary at ${report.primaryLsn ?? '?'}${primarySlot ? ` (${primarySlot})` : ''}; standby received ${report.standbyReceiveLsn ?? '?'}, ` +
    `replayed ${report.standbyReplayLsn ?? '?'}; standby slots before promotion: ${slots}; promoted at ${report.promotedLsn} (timeline ${report.promotedTimeline}); ` +
    `kill → promoted ${report.killToPromotedMs} ms, kill → proxy switched ${report.killToProxySwitchedMs} ms`
  );
}
