import { loadConfig, type OutboxOptions } from '../../../src/config';
import type { SlotRow, SlotSample } from '../../../src/watchdog/slot-query';

type WatchdogOptions = NonNullable<OutboxOptions['watchdog']>;

export function wdConfig(watchdog: WatchdogOptions = {}) {
  return loadConfig({ env: {}, overrides: { watchdog } }).watchdog;
}

export function row(over: Partial<SlotRow> = {}): SlotRow {
  return {
    slotName: 's1', slotType: 'logical', plugin: 'pgoutput', database: 'app', temporary: false, active: true, activePid: 1,
    xminAge: null, catalogXminAge: 5, restartLsn: '0/100', confirmedFlushLsn: '0/100', restartPos: 256, confirmedPos: 256,
    retainedBytes: 0, flushLagBytes: 0, restartToConfirmedBytes: 0, walStatus: 'reserved', safeWalSize: null, twoPhase: false,
    conflicting: null, invalidationReason: null, inactiveSinceMs: null, failover: null, synced: null, applicationName: 'debezium',
    clientAddr: null, walsenderState: 'streaming', sendLagBytes: 0, replyAgeSeconds: 1,
    ...over,
  };
}

export function sample(t: number, currentPos: number, slots: SlotRow[]): SlotSample {
  return { sampledAtMs: t, inRecovery: false, currentLsn: `0/${currentPos.toString(16)}`, currentPos, slots };
}
