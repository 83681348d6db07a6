import { REDACTED, redactValue } from '../log/redact';
import { isProviderReference } from './escape';

/** What a deploy would change in Connect's stored config, safe to print. */
export interface ConfigDiff {
  added: Array<{ key: string; value: string }>;
  changed: Array<{ key: string; from: string; to: string }>;
  removed: Array<{ key: string; value: string }>;
  unchanged: boolean;
}

export { REDACTED };

/**
 * A value as it may be shown: values of password/secret keys are redacted, except a config-provider
 * reference like `${env:OUTBOX_CDC_PASSWORD}`, which names where the secret lives and is not one.
 */
export function displayValue(key: string, value: string): string {
  return redactValue(key, value, isProviderReference);
}

/** A copy of a connector config with every secret value redacted. */
export function redactConnectorConfig(config: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(config).map(([k, v]) => [k, displayValue(k, v)]));
}

/** Key-by-key comparison of the stored config (`current`, absent for a new connector) and the desired one. */
export function diffConfigs(current: Readonly<Record<string, string>> | undefined, desired: Readonly<Record<string, string>>): ConfigDiff {
  const before = current ?? {};
  const diff: ConfigDiff = { added: [], changed: [], removed: [], unchanged: false };
  for (const key of Object.keys(desired).sort()) {
    const to = desired[key] as string;
    if (!Object.hasOwn(before, key)) diff.added.push({ key, value: displayValue(key, to) });
    else if (before[key] !== to) diff.changed.push({ key, from: displayValue(key, before[key] as string), to: displayValue(key, to) });
  }
  for (const key of Object.keys(before).sort()) {
    if (!Object.hasOwn(desired, key)) diff.removed.push({ key, value: displayValue(key, before[key] as string) });
  }
  diff.unchanged = current !== undefined && diff.added.length + diff.changed.length + diff.removed.length === 0;
  return diff;
}

/** `+ key=value`, `~ key: from -> to`, `- key=value` lines for people. */
export function formatDiff(diff: ConfigDiff): string[] {
  return [
    ...diff.added.map((d) => `+ ${d.key}=${d.value}`),
    ...diff.changed.map((d) => `~ ${d.key}: ${d.from} -> ${d.to}`),
    ...diff.removed.map((d) => `- ${d.key}=${d.value}`),
  ];
}
