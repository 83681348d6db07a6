/**
 * `outbox watchdog --once`: one sample judged as it is, printed as a table, with the
 * monitoring-plugin exit code (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN).
 */
import Table from 'cli-table3';
import { LEVEL_RANK, type Level } from './alert-state';
import type { AlertStatusRow } from './alert-engine';
import type { OutboxTableSample } from './outbox-query';
import { formatBytes, formatDuration } from './slot-lag-rules';
import type { TrackedSample } from './slot-tracker';

export const EXIT_CODES = Object.freeze({ OK: 0, WARNING: 1, CRITICAL: 2, UNKNOWN: 3 });

/** Worst level of the statuses; a failed poll is UNKNOWN whatever else is known. */
export function exitCodeFor(pollOk: boolean, statuses: readonly AlertStatusRow[]): number {
  if (!pollOk) return EXIT_CODES.UNKNOWN;
  const worst = statuses.reduce<Level>((w, s) => (LEVEL_RANK[s.level] > LEVEL_RANK[w] ? s.level : w), 'ok');
  return worst === 'critical' ? EXIT_CODES.CRITICAL : worst === 'warning' ? EXIT_CODES.WARNING : EXIT_CODES.OK;
}

export function renderOnce(cluster: string, sample: TrackedSample | undefined, statuses: readonly AlertStatusRow[], error?: string, outbox?: OutboxTableSample): string {
  const code = exitCodeFor(!error, statuses);
  const label = Object.entries(EXIT_CODES).find(([, v]) => v === code)?.[0] ?? 'UNKNOWN';
  const lines: string[] = [];
  lines.push(`SLOT WATCHDOG ${label} — ${cluster}${sample ? `, ${sample.slots.length} slot(s), current LSN ${sample.currentLsn ?? 'unknown'}${sample.inRecovery ? ' (standby)' : ''}` : ''}`);
  if (error) lines.push(error);
  if (sample && sample.slots.length > 0) {
    const table = new Table({ head: ['slot', 'type', 'database', 'active', 'wal_status', 'retained', 'flush lag', 'safe_wal_size', 'inactive', 'state'], style: { head: [], border: [] } });
    for (const s of sample.slots) {
      const mine = statuses.filter((r) => r.slot === s.slotName);
      const worst = mine.reduce<Level>((w, r) => (LEVEL_RANK[r.level] > LEVEL_RANK[w] ? r.level : w), 'ok');
      table.push([
        s.slotName,
        s.slotType,
        s.database ?? '',
        s.active ? 'yes' : 'no',
        s.walStatus ?? '',
        formatBytes(s.retainedBytes),
        formatBytes(s.flushLagBytes),
        s.safeWalSize === null ? 'unlimited' : formatBytes(s.safeWalSize),
        s.active ? '' : s.inactiveSource === 'server' ? formatDuration(s.inactiveMs) : 'unknown (<PG17)',
        worst.toUpperCase(),
      ]);
    }
    lines.push(table.toString());
  }
  if (outbox?.present) {
    const age = outbox.oldestPendingAgeSeconds === null ? `unreadable (${outbox.pendingError ?? 'unknown'})` : formatDuration(outbox.oldestPendingAgeSeconds * 1000);
    lines.push(`outbox ${outbox.table}: ${formatBytes(outbox.totalBytes)} with indexes, ~${outbox.estimatedRows ?? '?'} rows, ${outbox.deadTuples ?? '?'} dead; oldest row with published_at IS NULL: ${age}`);
  }
  for (const r of statuses.filter((x) => x.level !== 'ok')) lines.push(`${r.level.toUpperCase()} ${r.rule}${r.slot ? ` [${r.slot}]` : ''}: ${r.summary}`);
  return lines.join('\n') + '\n';
}
