import Table from 'cli-table3';
import { formatDuration as formatAge } from '../watchdog/slot-lag-rules';
import { formatBytes, formatDuration } from './format';
import type { Level, Section, SlotsData, StatusReport } from './types';

export interface RenderOptions {
  /** ANSI colours for states; default: stdout is a terminal and NO_COLOR is unset. */
  color?: boolean;
}

type Tone = 'good' | 'warn' | 'bad' | 'dim';
const ANSI: Record<Tone, [string, string]> = {
  good: ['\u001b[32m', '\u001b[39m'],
  warn: ['\u001b[33m', '\u001b[39m'],
  bad: ['\u001b[31m', '\u001b[39m'],
  dim: ['\u001b[2m', '\u001b[22m'],
};

function painter(color: boolean) {
  return (text: string, tone: Tone): string => (color ? `${ANSI[tone][0]}${text}${ANSI[tone][1]}` : text);
}

const levelTone = (level: Level): Tone => (level === 'OK' ? 'good' : level === 'WARNING' ? 'warn' : 'bad');

function table(head: string[], rows: string[][]): string {
  // No colours of cli-table3's own: ours are applied to the cells, and only on a terminal.
  const t = new Table({ head, style: { head: [], border: [], compact: true } });
  t.push(...rows);
  return t.toString();
}

function unreachable<T>(title: string, s: Section<T>): string | undefined {
  return s.ok ? undefined : `${title}\n  unreachable: ${s.error}`;
}

/** The human screen of `outbox status`: verdict and reasons first, then one block per section. */
export function renderStatus(status: StatusReport, options: RenderOptions = {}): string {
  const color = options.color ?? Boolean(process.stdout.isTTY && !process.env.NO_COLOR);
  const paint = painter(color);
  const state = (text: string, tone: Tone) => paint(text, tone);
  const blocks: string[] = [];

  const { verdict } = status;
  blocks.push(
    [
      `${paint(verdict.level, levelTone(verdict.level))}  outbox status at ${status.generatedAt} (exit code ${verdict.exitCode})`,
      ...verdict.reasons.map((r) => `  ${paint(r.level.padEnd(8), levelTone(r.level))} ${r.message}`),
    ].join('\n'),
  );

  // Stack
  const { stack } = status;
  if (!stack.ok) blocks.push(unreachable('Stack', stack) as string);
  else if (!stack.local) blocks.push(`Stack\n  ${stack.note ?? 'not the local stack'}`);
  else {
    const rows = stack.services.map((s) => [
      s.name,
      s.ready ? state('ready', 'good') : s.running ? state('NOT READY', 'warn') : state('stopped', 'bad'),
      s.pid === null ? '-' : String(s.pid),
      s.ports.join(','),
      s.rssBytes ? formatBytes(s.rssBytes) : '-',
      s.detail,
    ]);
    blocks.push(`Stack (local ports, this machine)\n${table(['service', 'state', 'pid', 'ports', 'rss', 'detail'], rows)}`);
  }

  // Connector
  const { connector } = status;
  const connectorTone = (s: string | null): Tone => (s === 'RUNNING' ? 'good' : s === 'FAILED' ? 'bad' : 'warn');
  if (!connector.ok) blocks.push(unreachable('Connector', connector) as string);
  else if (!connector.deployed) blocks.push(`Connector ${connector.name} at ${connector.url}\n  ${state('not deployed', 'bad')} (deploy it with \`outbox connector:deploy\`)`);
  else {
    const rows = [
      ['connector', state(connector.state ?? 'no status yet', connectorTone(connector.state)), connector.worker ?? '-', connector.trace ?? ''],
      ...connector.tasks.map((t) => [`task ${t.id}`, state(t.state, connectorTone(t.state)), t.worker, t.trace ?? '']),
    ];
    if (connector.tasks.length === 0) rows.push(['tasks', state('none', 'warn'), '-', '']);
    blocks.push(`Connector ${connector.name} at ${connector.url}\n${table(['instance', 'state', 'worker', 'trace (first line)'], rows)}`);
  }

  // Slots
  const { slots } = status;
  if (!slots.ok) blocks.push(unreachable('Replication slots', slots) as string);
  else {
    const walTone = (w: string | null): Tone => (w === 'lost' || w === 'unreserved' ? 'bad' : w === 'extended' ? 'warn' : w === 'reserved' ? 'good' : 'dim');
    const rows = slots.slots.map((s) => [
      s.configured ? s.name : `${s.name} ${paint('(other)', 'dim')}`,
      s.active ? state('active', 'good') : state('INACTIVE', s.configured ? 'bad' : 'warn'),
      state(s.walStatus ?? '-', walTone(s.walStatus)),
      formatBytes(s.retainedBytes),
      formatBytes(s.confirmedLagBytes),
      s.safeWalSizeBytes === null ? 'unlimited' : formatBytes(s.safeWalSizeBytes),
      `${s.plugin ?? '-'} / ${s.database ?? '-'}`,
    ]);
    const missing = slots.found ? '' : `\n  ${state(`slot ${slots.slotName} does not exist`, 'bad')} (the connector creates it on deploy; \`outbox db:provision\` prepares the database)`;
    blocks.push(
      `Replication slots (configured: ${slots.slotName})${missing}` +
        (rows.length ? `\n${table(['slot', 'active', 'wal_status', 'retained WAL', 'unconfirmed', 'safe_wal_size', 'plugin / database'], rows)}` : '\n  no logical slots'),
    );
    blocks.push(renderStandby(slots.standby, state));
  }

  // Consumer groups
  const { consumerGroups: cg } = status;
  if (!cg.ok) blocks.push(unreachable('Consumer groups', cg) as string);
  else {
    const lagWarn = status.options.lagWarn;
    const rows: string[][] = [];
    for (const g of cg.groups) {
      const groupState = state(g.state, g.state === 'Stable' ? 'good' : g.state === 'Dead' || g.state === 'Empty' ? 'warn' : 'dim');
      const members = `${g.members}${g.clients.length ? ` (${g.clients.join(', ')})` : ''}`;
      if (g.topics.length === 0) rows.push([g.groupId, groupState, members, g.state === 'Dead' ? 'no such group' : 'no committed offsets', '-']);
      for (const [i, t] of g.topics.entries()) {
        rows.push([i === 0 ? g.groupId : '', i === 0 ? groupState : '', i === 0 ? members : '', t.topic, state(String(t.lag), t.lag > lagWarn ? 'warn' : 'good')]);
      }
    }
    blocks.push(`Consumer groups (routed topics ${cg.topicPattern}; lag warning over ${lagWarn})\n${rows.length ? table(['group', 'state', 'members', 'topic', 'lag'], rows) : '  none'}`);
  }

  // DLQ
  const { dlq } = status;
  if (!dlq.ok) blocks.push(unreachable('DLQ', dlq) as string);
  else {
    const retention = (ms: number | null) => (ms === null ? '?' : ms === -1 ? state('forever', 'good') : state(formatDuration(ms), 'warn'));
    const rows = dlq.topics.map((t) => [t.topic, String(t.partitions), state(String(t.depth), t.depth > 0 ? 'warn' : 'good'), retention(t.retentionMs)]);
    blocks.push(
      `DLQ (topics ${dlq.topicPattern}; ${dlq.total} record${dlq.total === 1 ? '' : 's'} in all)\n` +
        (rows.length ? table(['topic', 'partitions', 'depth', 'retention'], rows) : '  no DLQ topics'),
    );
  }

  // Parked keys
  const { parked } = status;
  if (!parked.ok) blocks.push(unreachable('Parked keys', parked) as string);
  else if (!parked.provisioned) blocks.push(`Parked keys (${parked.table})\n  table not there: the database is not provisioned (\`outbox db:provision\`)`);
  else if (parked.totalKeys === 0) blocks.push(`Parked keys (${parked.table})\n  ${state('none', 'good')}`);
  else {
    const rows = parked.keys.map((k) => [k.consumer, k.aggregateType, k.aggregateId, state(String(k.events), 'warn'), k.headEventId, k.headErrorCode, k.since]);
    const more = parked.totalKeys > parked.keys.length ? `\n  … and ${parked.totalKeys - parked.keys.length} more key(s) (--parked-limit, --json)` : '';
    blocks.push(
      `Parked keys (${parked.table}; ${parked.totalKeys} key${parked.totalKeys === 1 ? '' : 's'}, ${parked.totalEvents} event${parked.totalEvents === 1 ? '' : 's'}; the most events first)\n` +
        `${table(['consumer', 'aggregate type', 'key', 'events', 'head event (replay first)', 'head error', 'since'], rows)}${more}`,
    );
  }

  // Outbox table
  const { outboxTable: ot } = status;
  if (!ot.ok) blocks.push(unreachable('Outbox table', ot) as string);
  else if (!ot.provisioned) blocks.push(`Outbox table (${ot.table})\n  table not there: the database is not provisioned (\`outbox db:provision\`)`);
  else {
    const o = status.options;
    const ageMs = ot.oldestPendingAgeSeconds === null ? null : ot.oldestPendingAgeSeconds * 1000;
    const waiting =
      ot.pendingError !== null
        ? state('unreadable', 'warn')
        : `${ot.pendingCapped ? '≥ ' : ''}${ot.pendingRows ?? '-'}${ot.pendingRows ? `, the oldest ${state(formatAge(ageMs), ageMs !== null && ageMs > o.outboxWarnAgeMs ? 'warn' : 'good')} old` : ''}`;
    const rows = [
      ['size (with indexes)', state(formatBytes(ot.totalBytes), ot.totalBytes !== null && ot.totalBytes > o.outboxWarnBytes ? 'warn' : 'good')],
      ['rows (estimate)', String(ot.estimatedRows ?? '-')],
      ['dead tuples', String(ot.deadTuples ?? '-')],
      ['last autovacuum', ot.lastAutovacuum ?? 'never'],
      ['last vacuum', ot.lastVacuum ?? 'never'],
      ['published_at IS NULL', waiting],
    ];
    blocks.push(
      `Outbox table (${ot.table}; warning: oldest waiting row over ${formatDuration(o.outboxWarnAgeMs)}, size over ${formatBytes(o.outboxWarnBytes)}` +
        `${o.outboxWarnPending === null ? '' : `, over ${o.outboxWarnPending} waiting rows`})\n${rows.map(([k, v]) => `  ${(k as string).padEnd(22)}${v}`).join('\n')}` +
        (ot.pendingError ? `\n  ${ot.pendingError}` : ''),
    );
  }

  // Routed topics' partitions (shown when there are routed topics, or when they could not be read)
  const tp = status.topicPartitions;
  if (tp && !tp.ok) blocks.push(unreachable('Routed topics', tp) as string);
  else if (tp && tp.topics.length > 0) {
    const changed = new Map(tp.changes.map((c) => [c.topic, c]));
    const rows = tp.topics.map((t) => {
      const c = changed.get(t.topic);
      const expected = c ? `${c.expected} (${c.source})` : t.recorded !== null ? String(t.recorded) : tp.creationDefault !== null ? `${tp.creationDefault} (creation default)` : '-';
      return [t.topic, state(String(t.partitions), c ? 'warn' : 'good'), expected];
    });
    const note = tp.recorded ? '' : '\n  no record table (migration 014): `outbox db:provision`, then `outbox connector:deploy` records the counts';
    blocks.push(`Routed topics (partitions against the count recorded by connector:deploy or topics:grow)\n${table(['topic', 'partitions', 'recorded'], rows)}${note}`);
  }

  // Watchdog
  const { watchdog } = status;
  if (!watchdog.ok) blocks.push(unreachable('Watchdog', watchdog) as string);
  else if (!watchdog.running) blocks.push(`Watchdog at ${watchdog.url}\n  watchdog not running (start it with \`outbox watchdog\`)`);
  else {
    const firing = watchdog.firing.length ? state(`firing: ${watchdog.firing.join(', ')}`, 'warn') : state('no alerts firing', 'good');
    const body = typeof watchdog.health === 'string' ? watchdog.health : JSON.stringify(watchdog.health, null, 2);
    const lines = (body ?? '').split('\n');
    const shown = lines.length > 30 ? [...lines.slice(0, 30), `… (${lines.length - 30} more lines; --json shows all)`] : lines;
    blocks.push(`Watchdog at ${watchdog.url}: /healthz HTTP ${watchdog.httpStatus}, ${firing}\n${shown.map((l) => `  ${l}`).join('\n')}`);
  }

  return `${blocks.join('\n\n')}\n`;
}

/** The standby's failover-slot readiness (watchdog.standby.databaseUrl), or `not configured`. */
function renderStandby(standby: SlotsData['standby'], state: (text: string, tone: Tone) => string): string {
  if (!standby.configured) return `Standby failover slots: ${state('not configured', 'dim')} (watchdog.standby.databaseUrl)`;
  const head = `Standby failover slots at ${standby.target}`;
  if (standby.error) return `${head}\n  ${state('unreadable', 'warn')}: ${standby.error}`;
  if (standby.inRecovery === false) return `${head}\n  ${state('not a standby', 'warn')} (not in recovery: promoted?)`;
  if (standby.slots.length === 0) return `${head}\n  no failover slots on the primary`;
  const rows = standby.slots.map((r) => [
    r.slotName,
    state(r.readiness, r.readiness === 'ready' ? 'good' : 'bad'),
    r.synced === null ? '-' : String(r.synced),
    r.temporary === null ? '-' : String(r.temporary),
    r.invalidationReason ?? '-',
    r.lagBytes === null ? '-' : formatBytes(r.lagBytes),
  ]);
  return `${head}\n${table(['slot', 'readiness', 'synced', 'temporary', 'invalidation_reason', 'behind primary'], rows)}`;
}
