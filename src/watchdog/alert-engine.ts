/**
 * Runs every rule against every watched slot after each poll and turns state transitions into
 * notifications. Rules: slot-lag-rules.ts; state machine: alert-state.ts. Two cases never look like a
 * resolution: a failed poll (slot alerts keep their state, WatchdogDatabaseUnreachable fires) and a
 * slot that disappears (its firing alerts end with status `dropped`; a slot listed in
 * `watchdog.slots`, or with that list empty the connector's own slot, that is missing fires
 * SlotMissing). PublicationDrift is judged on the connector's slot, so it also ends as `dropped` when
 * the slot goes (SlotMissing then takes over). The outbox rules (outbox-rules.ts) are judged once per
 * poll on the outbox sample, with no slot, when the watchdog samples the outbox (watchdog.watchOutbox).
 */
import { createHash } from 'node:crypto';
import { PUBLICATION_FIX, type PublicationCheck } from '../connector/publication-check';
import { evaluateFailoverDisabled, evaluateFailoverSlot, evaluateStandbyRead, FAILOVER_VERSION, slotMissingAfterFailover, standbyReadiness, type FailoverFacts } from './failover-rules';
import { initialAlertState, step, type AlertEvent, type AlertState, type Level, type Severity } from './alert-state';
import type { OutboxTableSample } from './outbox-query';
import { OUTBOX_RULES, evaluateOutboxRule, outboxValues, type OutboxPartitioning } from './outbox-rules';
import { SLOT_RULES, evaluateSlotRule, ruleHoldForMs, type RuleName, type WatchdogConfig } from './slot-lag-rules';
import type { ServerSettings } from './slot-query';
import type { SlotStatus, TrackedSample } from './slot-tracker';

export type NotificationStatus = 'firing' | 'resolved' | 'dropped';

export interface SlotRef {
  name: string;
  type: string | null;
  database: string | null;
  plugin: string | null;
}

export type AlertValues = Record<string, number | string | boolean | null>;

/** One notification; delivery formats it per receiver (payloads.ts). docs/watchdog.md documents it. */
export interface AlertNotification {
  /** Unique per notification, the same on every retry of it (Standard Webhooks `webhook-id`). */
  id: string;
  /** Stable per cluster + slot + rule: correlates firing, repeats and the resolution. */
  dedupKey: string;
  event: AlertEvent | 'dropped';
  status: NotificationStatus;
  /** The level notified; for `resolved`/`dropped` the level that was firing. */
  severity: Severity;
  previousSeverity: Level | null;
  rule: RuleName;
  cluster: string;
  slot: SlotRef | null;
  summary: string;
  startsAt: string;
  endsAt: string | null;
  at: string;
  values: AlertValues;
}

export interface AlertStatusRow {
  rule: RuleName;
  slot: string | null;
  level: Level;
  summary: string;
}

export interface AlertEngine {
  /**
   * After a successful poll; `publication` when the connector's slot exists in the watched database,
   * `outbox` when the outbox table was sampled (watchdog.watchOutbox), `failover` when the failover
   * facts were read (failover-rules.ts).
   */
  evaluate(sample: TrackedSample, settings: ServerSettings | null, publication?: PublicationCheck, outbox?: OutboxTableSample, failover?: FailoverFacts): AlertNotification[];
  /** After a failed poll: `reason` names the failure and the fix. */
  pollFailed(reason: string, details?: AlertValues): AlertNotification[];
  /** Alerts firing now, as notifications (Alertmanager re-posts them). */
  firing(): AlertNotification[];
  /** Every alert that is not OK, and the last verdicts (the --once table). */
  statuses(): AlertStatusRow[];
}

export interface AlertEngineOptions {
  config: WatchdogConfig;
  cluster: string;
  now?: () => number;
  /** `--once`: no hold-for, judge the single sample as it is. */
  instant?: boolean;
  /** The connector's slot (connector.slotName): expected to exist when `config.slots` is empty. */
  connectorSlot?: string;
  /** The connector's name (connector.name), for the fixes the failover rules name. */
  connector?: string;
  /** outbox.partitionSeconds and partitionsAhead: what OutboxPartitionsRunningOut compares the headroom to. */
  outboxPartitions?: OutboxPartitioning;
}

/** The slots that must exist: the listed ones, else the connector's own (when the pipeline is watched). */
export function expectedSlots(config: WatchdogConfig, connectorSlot: string | undefined): string[] {
  if (config.slots.length > 0) return [...config.slots];
  return config.watchConnector && connectorSlot ? [connectorSlot] : [];
}

interface Tracked {
  rule: RuleName;
  slot: SlotRef | null;
  state: AlertState;
  summary: string;
  values: AlertValues;
  observed: Level | undefined;
}

export function dedupKey(cluster: string, slot: string | null, rule: RuleName): string {
  return createHash('sha256').update(`${cluster}|${slot ?? ''}|${rule}`).digest('hex').slice(0, 32);
}

function slotValues(slot: SlotStatus, walRate: number | null, settings: ServerSettings | null): AlertValues {
  return {
    active: slot.active,
    walStatus: slot.walStatus,
    retainedBytes: slot.retainedBytes,
    flushLagBytes: slot.flushLagBytes,
    safeWalSizeBytes: slot.safeWalSize,
    inactiveMs: slot.inactiveMs,
    stalledMs: slot.stalledMs,
    retainedGrowthBytesPerSecond: slot.retainedGrowthBytesPerSecond,
    walRateBytesPerSecond: walRate,
    etaInvalidationMs: slot.etaInvalidationMs,
    etaDiskBudgetMs: slot.etaDiskBudgetMs,
    maxSlotWalKeepBytes: settings?.maxSlotWalKeepBytes ?? null,
    invalidationReason: slot.invalidationReason,
    restartLsn: slot.restartLsn,
    confirmedFlushLsn: slot.confirmedFlushLsn,
    applicationName: slot.applicationName,
  };
}

export function createAlertEngine(options: AlertEngineOptions): AlertEngine {
  const { config, cluster } = options;
  const now = options.now ?? Date.now;
  const alerts = new Map<string, Tracked>();
  let failures = 0;

  const keyOf = (slot: string | null, rule: RuleName) => `${slot ?? ''}\u0000${rule}`;

  const toNotification = (t: Tracked, event: AlertEvent | 'dropped', previous: Level, at: number): AlertNotification => {
    const key = dedupKey(cluster, t.slot?.name ?? null, t.rule);
    const ending = event === 'resolved' || event === 'dropped';
    const severity = (ending ? previous : t.state.level) as Severity;
    const startsAt = new Date(t.state.startsAt ?? at).toISOString();
    return {
      id: `msg_${createHash('sha256').update(`${key}|${startsAt}|${t.state.sequence}|${event}`).digest('hex').slice(0, 24)}`,
      dedupKey: key,
      event,
      status: event === 'dropped' ? 'dropped' : event === 'resolved' ? 'resolved' : 'firing',
      severity,
      previousSeverity: event === 'firing' ? null : previous,
      rule: t.rule,
      cluster,
      slot: t.slot,
      summary:
        event === 'dropped'
          ? `Slot ${t.slot?.name} no longer exists, so ${t.rule} cannot be judged any more: the alert ends without a resolution. Check that the slot was dropped on purpose (its consumer must re-snapshot).`
          : event === 'resolved'
            ? `Resolved: ${t.summary}`
            : t.summary,
      startsAt,
      endsAt: ending ? new Date(at).toISOString() : null,
      at: new Date(at).toISOString(),
      values: t.values,
    };
  };

  const judge = (slot: SlotRef | null, rule: RuleName, observed: Level | undefined, summary: string, values: AlertValues, out: AlertNotification[]) => {
    const key = keyOf(slot?.name ?? null, rule);
    const tracked = alerts.get(key) ?? { rule, slot, state: initialAlertState(), summary, values, observed };
    const at = now();
    const timing = {
      holdForMs: options.instant ? 0 : ruleHoldForMs(rule, config),
      clearForMs: options.instant ? 0 : config.clearForMs,
      repeatIntervalMs: config.repeatIntervalMs,
    };
    const transition = step(tracked.state, observed, at, timing);
    const updated: Tracked = { ...tracked, slot: slot ?? tracked.slot, state: transition.state, observed };
    if (observed !== undefined) {
      updated.summary = summary;
      updated.values = values;
    }
    alerts.set(key, updated);
    if (transition.event) out.push(toNotification(updated, transition.event, transition.previous, at));
  };

  /** The failover rules (failover-rules.ts): per slot of the primary, and the standby read itself. */
  const judgeFailover = (sample: TrackedSample, settings: ServerSettings | null, failover: FailoverFacts, out: AlertNotification[]) => {
    const refOf = (slot: SlotStatus): SlotRef => ({ name: slot.slotName, type: slot.slotType, database: slot.database, plugin: slot.plugin });
    const cdc = config.watchConnector && options.connectorSlot ? sample.slots.find((s) => s.slotName === options.connectorSlot) : undefined;
    if (cdc) {
      const v = evaluateFailoverDisabled(cdc, settings?.versionNum, failover.primary, options.connector ?? 'outbox-connector');
      judge(refOf(cdc), 'SlotFailoverDisabled', v.level, v.summary, { failover: cdc.failover, physicalStandbys: failover.primary?.physicalStandbys ?? null }, out);
    }
    const standby = failover.standby;
    if (!standby) return;
    const read = evaluateStandbyRead(standby);
    judge(null, 'FailoverStandbyUnreadable', read.level, read.summary, { standby: standby.target }, out);
    if (!standby.sample?.inRecovery || (settings?.versionNum ?? 0) < FAILOVER_VERSION) return;
    const readiness = new Map(standbyReadiness(sample.slots, standby.sample).map((r) => [r.slotName, r]));
    for (const slot of sample.slots.filter((s) => s.slotType === 'logical')) {
      const r = readiness.get(slot.slotName);
      // A slot that is not (or no longer) a failover slot has nothing to be ready for.
      const v = r ? evaluateFailoverSlot(r, standby.target) : { level: 'ok' as const, summary: `Slot ${slot.slotName} is not a failover slot.` };
      const values: AlertValues = r ? { standby: standby.target, readiness: r.readiness, synced: r.synced, temporary: r.temporary, invalidationReason: r.invalidationReason, lagBytes: r.lagBytes } : {};
      judge(refOf(slot), 'FailoverSlotNotReady', v.level, v.summary, values, out);
    }
  };

  return {
    evaluate(sample, settings, publication, outbox, failover) {
      const out: AlertNotification[] = [];
      failures = 0;
      judge(null, 'WatchdogDatabaseUnreachable', 'ok', `The watchdog reaches PostgreSQL (${cluster}).`, {}, out);
      const watched = config.slots.length > 0 ? sample.slots.filter((s) => config.slots.includes(s.slotName)) : sample.slots;
      for (const slot of watched) {
        const ref: SlotRef = { name: slot.slotName, type: slot.slotType, database: slot.database, plugin: slot.plugin };
        const values = slotValues(slot, sample.walRateBytesPerSecond, settings);
        for (const rule of SLOT_RULES) {
          const current = alerts.get(keyOf(slot.slotName, rule))?.state.level ?? 'ok';
          const verdict = evaluateSlotRule(rule, slot, { config, settings, current });
          judge(ref, rule, verdict.level, verdict.summary, values, out);
        }
      }
      // gone slots: end their alerts as dropped, never as resolved
      const present = new Set(sample.slots.map((s) => s.slotName));
      for (const [key, t] of alerts) {
        if (t.slot === null || t.rule === 'SlotMissing' || present.has(t.slot.name)) continue;
        if (t.state.level !== 'ok') out.push(toNotification({ ...t, state: { ...t.state, sequence: t.state.sequence + 1 } }, 'dropped', t.state.level, now()));
        alerts.delete(key);
      }
      const listed = config.slots.length > 0;
      for (const name of expectedSlots(config, options.connectorSlot)) {
        const missing = !present.has(name);
        // The connector's slot missing under a stored Connect offset: what a failover without failover slots leaves.
        const lostOffset = missing && name === options.connectorSlot ? failover?.connectorOffsetLsn : undefined;
        judge(
          { name, type: null, database: null, plugin: null },
          'SlotMissing',
          missing ? 'critical' : 'ok',
          lostOffset
            ? slotMissingAfterFailover(name, cluster, lostOffset, failover?.primary?.timeline ?? null)
            : missing
            ? listed
              ? `Slot ${name} (listed in watchdog.slots) does not exist on ${cluster}. If it was dropped, its consumer lost its position: recreate it and re-snapshot, or remove it from watchdog.slots.`
              : `Slot ${name}, the Debezium connector's slot (connector.slotName), does not exist on ${cluster}: nothing streams the outbox. If it was dropped or lost, events written since are not published: ` +
                'reconcile them, then deploy again (outbox connector:deploy refuses while a stored offset has no slot). A relay-only deployment sets watchdog.watchConnector=false (OUTBOX_WATCHDOG_WATCH_CONNECTOR).'
            : `Slot ${name} exists.`,
          lostOffset ? { code: 'SLOT_MISSING_AFTER_FAILOVER', storedOffsetLsn: lostOffset, timeline: failover?.primary?.timeline ?? null } : {},
          out,
        );
      }
      if (failover) judgeFailover(sample, settings, failover, out);
      if (publication && options.connectorSlot) {
        const slot = sample.slots.find((s) => s.slotName === options.connectorSlot);
        const ref: SlotRef = { name: options.connectorSlot, type: slot?.slotType ?? null, database: slot?.database ?? null, plugin: slot?.plugin ?? null };
        judge(
          ref,
          'PublicationDrift',
          publication.ok ? 'ok' : 'critical',
          publication.ok
            ? `Publication ${publication.publication} publishes inserts of ${publication.schema}.${publication.table}.`
            : `Outbox events are being lost: ${publication.problems.join('; ')}. The heartbeat still advances slot ${options.connectorSlot}, so no slot alert shows it. ${PUBLICATION_FIX}`,
          { publication: publication.publication, pubinsert: publication.pubinsert, tablePublished: publication.tablePublished, rowFilter: publication.rowFilter },
          out,
        );
      }
      if (outbox) {
        const values = outboxValues(outbox);
        for (const rule of OUTBOX_RULES) {
          const verdict = evaluateOutboxRule(rule, outbox, config, alerts.get(keyOf(null, rule))?.state.level ?? 'ok', options.outboxPartitions);
          judge(null, rule, verdict.level, verdict.summary, values, out);
        }
      }
      return out;
    },
    pollFailed(reason, details = {}) {
      const out: AlertNotification[] = [];
      failures++;
      const level: Level | undefined = failures >= config.rules.unreachableAfterFailures ? 'critical' : undefined;
      judge(null, 'WatchdogDatabaseUnreachable', level, `The watchdog cannot read replication slots on ${cluster} (${failures} failed poll${failures === 1 ? '' : 's'} in a row): ${reason}`, { failures, ...details }, out);
      return out;
    },
    firing() {
      const at = now();
      return [...alerts.values()].filter((t) => t.state.level !== 'ok').map((t) => ({ ...toNotification(t, 'repeat', t.state.level, at), event: 'repeat' as const }));
    },
    statuses() {
      return [...alerts.values()]
        .filter((t) => t.state.level !== 'ok' || (t.observed !== undefined && t.observed !== 'ok'))
        .map((t) => ({ rule: t.rule, slot: t.slot?.name ?? null, level: t.state.level, summary: t.summary }));
    },
  };
}
