import type { OutboxConfig } from '../config';
import { clientConfig, withClient } from '../db';
import { DEFAULT_BACKLOG_CAP, sampleOutbox } from '../watchdog/outbox-query';
import type { OutboxTableData } from './types';

/** Age of the oldest waiting row above which `outbox status` warns (--outbox-warn-age-ms): the watchdog's OutboxBacklogAge warning. */
export const DEFAULT_OUTBOX_WARN_AGE_MS = 15 * 60_000;
/** Size of the outbox table above which it warns (--outbox-warn-bytes): the watchdog's OutboxTableSize warning. */
export const DEFAULT_OUTBOX_WARN_BYTES = 1024 ** 3;

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** The outbox table's health, through the one outbox sample (src/watchdog/outbox-query.ts), waiting rows counted up to DEFAULT_BACKLOG_CAP. */
export async function readOutboxTable(config: OutboxConfig, timeoutMs: number): Promise<OutboxTableData> {
  const { schema, table } = config.outbox;
  const settings = clientConfig(config.database, { application_name: 'outbox-router status', connectionTimeoutMillis: timeoutMs, statement_timeout: timeoutMs });
  const s = await withClient(settings, (client) => sampleOutbox(client, { schema, table, backlogCap: DEFAULT_BACKLOG_CAP }));
  return {
    table: s.table,
    provisioned: s.present,
    estimatedRows: s.estimatedRows,
    totalBytes: s.totalBytes,
    deadTuples: s.deadTuples,
    lastAutovacuum: iso(s.lastAutovacuumMs),
    lastVacuum: iso(s.lastVacuumMs),
    oldestPendingAgeSeconds: s.oldestPendingAgeSeconds,
    pendingRows: s.pendingRows,
    pendingCapped: s.pendingCapped,
    pendingError: s.pendingError,
  };
}
