import { formatDuration as formatAge } from '../watchdog/slot-lag-rules';
import { formatBytes, formatDuration } from './format';
import { describeChange } from '../topics/partition-record';
import type { Level, StatusReport, Verdict } from './types';

/** What the verdict is computed from: the sections and the thresholds, not the verdict itself. */
export type VerdictInput = Pick<StatusReport, 'stack' | 'connector' | 'slots' | 'consumerGroups' | 'dlq' | 'parked' | 'watchdog'> &
  Partial<Pick<StatusReport, 'outboxTable' | 'topicPartitions'>> & {
    options: Pick<StatusReport['options'], 'lagWarn' | 'groupsGiven'> &
      Partial<Pick<StatusReport['options'], 'parkedWarnKeys' | 'parkedWarnAgeMs' | 'outboxWarnAgeMs' | 'outboxWarnBytes' | 'outboxWarnPending'>>;
  };

const SECTION_LABELS: Record<keyof Omit<VerdictInput, 'options'>, string> = {
  stack: 'stack',
  connector: 'connector',
  slots: 'replication slots',
  consumerGroups: 'consumer groups',
  dlq: 'DLQ',
  parked: 'parked keys',
  outboxTable: 'outbox table',
  topicPartitions: 'routed topics\' partitions',
  watchdog: 'watchdog',
};

/**
 * The verdict rules (docs/status.md):
 * CRITICAL — connector not deployed or FAILED; a task FAILED; the configured slot missing or inactive;
 *   any logical slot with wal_status `unreserved` or `lost`.
 * WARNING — a section could not be read; connector or task in another state than RUNNING (PAUSED,
 *   STOPPED, UNASSIGNED, RESTARTING) or RUNNING without tasks; a local stack service stopped or not
 *   ready; another logical slot inactive; wal_status `extended`; a group's lag on a topic over
 *   --lag-warn; a group named by --group that does not exist; a DLQ topic holding records; a DLQ
 *   topic whose retention.ms is not -1 (dead letters expire unseen); parked keys (more than
 *   --parked-warn-keys, default 0, or the oldest older than --parked-warn-age-ms); the outbox table's
 *   oldest waiting row older than --outbox-warn-age-ms (default 15 min), the table larger than
 *   --outbox-warn-bytes (default 1 GiB), more waiting rows than --outbox-warn-pending (default: no
 *   rule), or its waiting rows unreadable; the watchdog reporting firing alerts or an unhealthy /healthz.
 */
export function computeVerdict(input: VerdictInput): Verdict {
  const reasons: Verdict['reasons'] = [];
  const critical = (message: string) => reasons.push({ level: 'CRITICAL', message });
  const warning = (message: string) => reasons.push({ level: 'WARNING', message });

  for (const [key, label] of Object.entries(SECTION_LABELS) as Array<[keyof typeof SECTION_LABELS, string]>) {
    const section = input[key];
    if (section && !section.ok) warning(`${label}: could not be checked (${firstSentence(section.error)})`);
  }

  const { stack, connector, slots, consumerGroups, dlq, parked, watchdog } = input;
  if (stack.ok && stack.local) {
    for (const s of stack.services) {
      if (!s.running) warning(`stack: ${s.name} is not running`);
      else if (!s.ready) warning(`stack: ${s.name} is running but not ready (${s.detail})`);
    }
  }

  if (connector.ok) {
    const name = connector.name;
    if (!connector.deployed) critical(`connector ${name} is not deployed`);
    else if (connector.state === 'FAILED') critical(`connector ${name} is FAILED`);
    else if (connector.state === null) warning(`connector ${name} has no status yet`);
    else if (connector.state !== 'RUNNING') warning(`connector ${name} is ${connector.state}, not RUNNING`);
    else if (connector.tasks.length === 0) warning(`connector ${name} is RUNNING without tasks`);
    for (const t of connector.tasks) {
      if (t.state === 'FAILED') critical(`connector ${name} task ${t.id} is FAILED on ${t.worker}`);
      else if (t.state !== 'RUNNING') warning(`connector ${name} task ${t.id} is ${t.state}, not RUNNING`);
    }
  }

  if (slots.ok) {
    if (!slots.found) critical(`replication slot ${slots.slotName} does not exist`);
    for (const s of slots.slots) {
      const which = s.configured ? `replication slot ${s.name}` : `other logical slot ${s.name}`;
      if (!s.active) (s.configured ? critical : warning)(`${which} is inactive${s.configured ? '' : ' and retains WAL (drop it if nothing uses it)'}`);
      if (s.walStatus === 'lost' || s.walStatus === 'unreserved') critical(`${which} has wal_status ${s.walStatus}`);
      else if (s.walStatus === 'extended') warning(`${which} has wal_status extended (beyond max_wal_size)`);
    }
    const { standby } = slots;
    if (standby.configured) {
      if (standby.error) warning(`the standby ${standby.target} cannot be read: ${standby.error}`);
      else if (standby.inRecovery === false) warning(`${standby.target} (watchdog.standby.databaseUrl) is not a standby (not in recovery)`);
      for (const r of standby.slots) if (r.readiness !== 'ready') critical(`failover slot ${r.slotName} is not ready on the standby ${standby.target} (${r.readiness}): a failover now would lose it`);
    }
  }

  if (consumerGroups.ok) {
    for (const g of consumerGroups.groups) {
      if (g.requested && input.options.groupsGiven && g.state === 'Dead' && g.topics.length === 0) {
        warning(`consumer group ${g.groupId} does not exist (no members, no committed offsets)`);
      }
      for (const t of g.topics) {
        if (t.lag > input.options.lagWarn) warning(`consumer group ${g.groupId} lags ${t.lag} records on ${t.topic} (over --lag-warn ${input.options.lagWarn})`);
      }
    }
  }

  if (dlq.ok) {
    for (const t of dlq.topics) {
      if (t.depth > 0) warning(`DLQ ${t.topic} holds ${t.depth} record${t.depth === 1 ? '' : 's'}`);
      if (t.retentionMs !== null && t.retentionMs !== -1) {
        warning(
          `DLQ ${t.topic} deletes dead letters after ${formatDuration(t.retentionMs)} (retention.ms=${t.retentionMs}): ` +
            `keep them with \`kafka-configs.sh --alter --entity-type topics --entity-name ${t.topic} --add-config retention.ms=-1\``,
        );
      }
    }
  }

  const warnKeys = input.options.parkedWarnKeys ?? 0;
  const warnAge = input.options.parkedWarnAgeMs ?? null;
  const tooOld = warnAge !== null && parked.ok && parked.oldestAgeMs !== null && parked.oldestAgeMs > warnAge;
  if (parked.ok && parked.totalKeys > 0 && (parked.totalKeys > warnKeys || tooOld)) {
    const over = warnKeys === 0 && warnAge === null ? '' : tooOld ? `; parked longer than --parked-warn-age-ms ${warnAge}` : `; over --parked-warn-keys ${warnKeys}`;
    warning(
      `${parked.totalKeys} key${parked.totalKeys === 1 ? '' : 's'} parked in ${parked.table} (${parked.totalEvents} event${parked.totalEvents === 1 ? '' : 's'}` +
        `${parked.oldestSince ? `, the longest since ${parked.oldestSince}` : ''}${over}): their events go to the DLQ until \`outbox dlq:replay\` applies them`,
    );
  }

  const outbox = input.outboxTable;
  if (outbox?.ok && outbox.provisioned) {
    const { outboxWarnAgeMs, outboxWarnBytes, outboxWarnPending } = input.options;
    const age = outbox.oldestPendingAgeSeconds;
    if (outbox.pendingError) warning(`outbox table ${outbox.table}: the waiting rows could not be read (${outbox.pendingError})`);
    if (age !== null && outboxWarnAgeMs !== undefined && age * 1000 > outboxWarnAgeMs) {
      warning(
        `outbox table ${outbox.table}: the oldest row with published_at IS NULL is ${formatAge(age * 1000)} old (over --outbox-warn-age-ms ${outboxWarnAgeMs}): ` +
          'the relay is not publishing it, or (CDC) published rows are not being cleaned up',
      );
    }
    if (outbox.totalBytes !== null && outboxWarnBytes !== undefined && outbox.totalBytes > outboxWarnBytes) {
      warning(`outbox table ${outbox.table} takes ${formatBytes(outbox.totalBytes)} with its indexes (over --outbox-warn-bytes ${outboxWarnBytes})`);
    }
    if (outbox.pendingRows !== null && outboxWarnPending !== undefined && outboxWarnPending !== null && outbox.pendingRows > outboxWarnPending) {
      warning(`outbox table ${outbox.table}: ${outbox.pendingCapped ? 'at least ' : ''}${outbox.pendingRows} rows with published_at IS NULL (over --outbox-warn-pending ${outboxWarnPending})`);
    }
  }

  const partitions = input.topicPartitions;
  if (partitions?.ok) for (const change of partitions.changes) warning(describeChange(change));

  if (watchdog.ok && watchdog.running) {
    if (watchdog.firing.length > 0) warning(`watchdog: ${watchdog.firing.length} alert(s) firing: ${watchdog.firing.join(', ')}`);
    else if (watchdog.httpStatus !== null && watchdog.httpStatus >= 400) warning(`watchdog: /healthz answered HTTP ${watchdog.httpStatus}`);
  }

  const level: Level = reasons.some((r) => r.level === 'CRITICAL') ? 'CRITICAL' : reasons.length > 0 ? 'WARNING' : 'OK';
  reasons.sort((a, b) => (a.level === b.level ? 0 : a.level === 'CRITICAL' ? -1 : 1));
  return { level, exitCode: level === 'OK' ? 0 : level === 'WARNING' ? 1 : 2, reasons };
}

function firstSentence(text: string): string {
  const line = text.split('\n')[0] ?? '';
  const end = line.search(/\.\s/);
  return end > 0 ? line.slice(0, end) : line.replace(/\.$/, '');
}
