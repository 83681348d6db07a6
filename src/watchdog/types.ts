import type { DeliveryEventName } from './deliver';

/** Namespaced watchdog events; listeners that throw are ignored. */
export type WatchdogEventName = 'watchdog.poll' | 'watchdog.poll-failed' | 'watchdog.alert' | DeliveryEventName;
export type WatchdogListener = (name: WatchdogEventName, data: Record<string, unknown>) => void;
