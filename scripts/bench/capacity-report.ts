/** The capacity bench's tables on stdout (capacity.ts); the JSON file has every figure. */
import type { InboxResult } from './capacity-inbox';
import type { OutboxResult } from './capacity-outbox';

interface Report {
  startedAt: string;
  endedAt: string;
  machine: { cpus: number; loadAverage: { min1: number; max1: number; mean1: number } };
  server: Record<string, string>;
  inbox: InboxResult[];
  outbox: OutboxResult[];
}

const n = (v: number, digits = 0) => v.toLocaleString('en', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const mb = (bytes: number) => `${n(bytes / 1e6, 1)} MB`;
const gb = (bytes: number) => `${n(bytes / 1e9, 1)} GB`;
const s = (ms: number) => `${n(ms / 1000, 1)} s`;

function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

export function printReport(r: Report): void {
  const out: string[] = [];
  out.push(
    `capacity bench ${r.startedAt} → ${r.endedAt}; PostgreSQL ${r.server.server_version}, shared_buffers ${r.server.shared_buffers}, max_wal_size ${r.server.max_wal_size}, ` +
      `checkpoint_timeout ${r.server.checkpoint_timeout}; ${r.machine.cpus} cores, load average ${n(r.machine.loadAverage.min1, 1)}–${n(r.machine.loadAverage.max1, 1)}`,
  );
  if (r.inbox.length) {
    out.push('', 'Inbox: size and load');
    out.push(
      table(
        ['form', 'rows', 'heap', 'indexes', 'total', 'partitions', 'load', 'load rows/s', 'load WAL'],
        r.inbox.map((i) => [i.form, n(i.size.rows), gb(i.size.heapBytes), gb(i.size.indexBytes), gb(i.size.totalBytes), String(i.size.partitions), s(i.load.ms), n(i.load.rowsPerSecond), gb(i.load.walBytes)]),
      ),
    );
    out.push('', "Inbox: the router's INSERT, empty inbox → beside the rows (µs per event, WAL bytes per event)");
    out.push(
      table(
        ['form', 'events per tx', 'empty µs', 'full µs', 'empty WAL B', 'full WAL B'],
        r.inbox.flatMap((i) =>
          i.insertFull.map((f, k) => {
            const e = i.insertEmpty[k];
            return [i.form, String(f.batch), e ? n(e.usPerEvent) : '', n(f.usPerEvent), e ? n(e.walBytesPerEvent) : '', n(f.walBytesPerEvent)];
          }),
        ),
      ),
    );
    out.push('', 'Inbox: pruning the oldest day');
    out.push(
      table(
        ['form', 'rows', 'time', 'WAL', 'statements', 'VACUUM after', 'VACUUM WAL', 'inbox lock held', 'probe p99', 'probe max'],
        r.inbox.map((i) => [
          i.form === 'plain' ? 'DELETE (pruneInbox)' : 'DROP (prunePartitionedInbox)',
          n(i.prune.rows),
          s(i.prune.ms),
          mb(i.prune.walBytes),
          String(i.prune.statements ?? ''),
          i.prune.vacuumMs !== undefined ? s(i.prune.vacuumMs) : '—',
          i.prune.vacuumWalBytes !== undefined ? mb(i.prune.vacuumWalBytes) : '—',
          i.prune.inboxHeldMs !== undefined ? `${n(i.prune.inboxHeldMs, 1)} ms (partition ${n(i.prune.partitionHeldMs ?? 0, 1)} ms)` : 'row locks only',
          `${n(i.prune.probe.p99Ms, 1)} ms`,
          `${n(i.prune.probe.maxMs, 1)} ms`,
        ]),
      ),
    );
  }
  if (r.outbox.length) {
    out.push('', 'Outbox: size and load');
    out.push(
      table(
        ['mode', 'rows', 'heap', 'indexes', 'total', 'partitions', 'load', 'load rows/s', 'load WAL'],
        r.outbox.map((o) => [o.mode, n(o.size.rows), gb(o.size.heapBytes), gb(o.size.indexBytes), gb(o.size.totalBytes), String(o.size.partitions), s(o.load.ms), n(o.load.rowsPerSecond), gb(o.load.walBytes)]),
      ),
    );
    out.push('', 'Outbox: cleanup runs beside the rows');
    out.push(
      table(
        ['mode', 'run', 'rows', 'partitions', 'statements', 'time', 'WAL', 'WAL B/row', 'µs/row'],
        r.outbox.flatMap((o) => [
          ...o.runs.map((c) => [o.mode, String(c.run), n(c.rows), String(c.partitionsDropped), String(c.statements), s(c.ms), mb(c.walBytes), c.rows ? n(c.walBytes / c.rows, 1) : '', c.rows ? n((c.ms * 1000) / c.rows, 2) : '']),
          ...(o.vacuumAfter ? [[o.mode, 'VACUUM', '', '', '', s(o.vacuumAfter.ms), mb(o.vacuumAfter.walBytes), '', '']] : []),
        ]),
      ),
    );
    out.push(table(['mode', 'probe writes', 'probe p50', 'probe p99', 'probe max'], r.outbox.map((o) => [o.mode, n(o.probe.statements), `${n(o.probe.p50Ms, 1)} ms`, `${n(o.probe.p99Ms, 1)} ms`, `${n(o.probe.maxMs, 1)} ms`])));
  }
  process.stdout.write(`${out.join('\n')}\n`);
}
