import { groupByKey, type KeyGroup, type RelayRecord } from './records';

/** How records reach Kafka; the relay builds it on a kafkajs producer, tests on a fake. */
export interface Sender {
  /** Everything in one call (one produce request per broker): the fast path. */
  sendAll(records: readonly RelayRecord[]): Promise<void>;
  /** One key's records, in order, in one call: one record batch on one partition, appended all or nothing. */
  sendKey(group: KeyGroup): Promise<void>;
}

export interface PublishOutcome {
  published: RelayRecord[];
  /** Keys that failed, each with all of its records of this batch and the error. */
  failed: Array<{ group: KeyGroup; error: unknown }>;
}

/** Keys sent at once on the slow path; a whole wave failing means the broker, not a key, is the problem. */
export const KEY_WAVE = 16;

/**
 * Publishes a claimed batch. The fast path sends it all at once. If that fails, the batch is sent again
 * key by key, so one key's failure (a record the broker refuses, a topic without ACL) blocks only that
 * key; a wave of keys failing together stops the slow path and fails the rest without trying (the broker
 * is down: trying 500 keys one by one would only stretch the outage). Records of the fast path that did
 * reach a partition are sent again: duplicates within the at-least-once window, never a gap, since a
 * key's records always go out together and in claim order.
 */
export async function publishBatch(records: readonly RelayRecord[], sender: Sender, wave = KEY_WAVE): Promise<PublishOutcome> {
  if (records.length === 0) return { published: [], failed: [] };
  let fastError: unknown;
  try {
    await sender.sendAll(records);
    return { published: [...records], failed: [] };
  } catch (error) {
    fastError = error;
  }
  const groups = groupByKey(records);
  if (groups.length === 1) return { published: [], failed: [{ group: groups[0] as KeyGroup, error: fastError }] };
  const published: RelayRecord[] = [];
  const failed: PublishOutcome['failed'] = [];
  for (let start = 0; start < groups.length; start += wave) {
    const slice = groups.slice(start, start + wave);
    const results = await Promise.allSettled(slice.map((g) => sender.sendKey(g)));
    results.forEach((r, i) => {
      const group = slice[i] as KeyGroup;
      if (r.status === 'fulfilled') published.push(...group.records);
      else failed.push({ group, error: r.reason });
    });
    if (results.every((r) => r.status === 'rejected')) {
      const last: unknown = (results[results.length - 1] as PromiseRejectedResult).reason;
      for (const group of groups.slice(start + wave)) failed.push({ group, error: last });
      break;
    }
  }
  return { published, failed };
}
