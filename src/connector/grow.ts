import { setTimeout as sleep } from 'node:timers/promises';
import type { Admin } from 'kafkajs';
import type { OutboxConfig } from '../config';
import { OutboxError } from '../errors';
import { createKafka } from '../kafka';
import type { Logger } from '../log';
import { createConnectClient } from './connect-client';
import { withAdmin } from './database';
import { recordPartitions } from '../topics/partition-record';

/**
 * Adding partitions to a routed topic without breaking per-key order (KAFKA-20030): a key's next events
 * may hash to a new partition while its earlier ones still wait unread in the old one, and two consumers
 * then apply them out of order. So: stop what writes the topics (the connector is stopped; a relay must
 * be stopped by its operator), wait until what was written stops growing, wait until every named
 * consumer group has committed past all of it, grow the topics, resume. A group that cannot be confirmed
 * in time refuses the growth, and the connector is resumed as it was.
 */
export interface GrowOptions {
  topics: readonly string[];
  /** The new partition count of every topic (above each one's current count). */
  partitions: number;
  /** The consumer groups that must have applied everything first (each router consumer of these topics). */
  groups: readonly string[];
  /**
   * `connector`: stop config.connector.name for the growth (STOPPED, not PAUSED: a paused task keeps its
   * producer, whose cached metadata would go on sending to the old partitions for up to
   * metadata.max.age.ms, 5 min by default, and move keys later, when no one waits for the groups); resumed
   * after, with new producers that see every partition. `none`: the caller has stopped every producer
   * (the relay), and starts them again after.
   */
  producer: 'connector' | 'none';
  /** The topics' end offsets must stay unchanged this long before they count as final (default 3 s). */
  settleMs?: number;
  /** Give up waiting for the groups after this long (default 5 min). */
  timeoutMs?: number;
  logger?: Logger;
}

export interface GrowReport {
  topics: Array<{ topic: string; from: number; to: number; endOffsets: Record<number, string> }>;
  groups: string[];
  /** The connector stopped for the growth and resumed after it. */
  stoppedConnector?: string;
  /** The new counts were recorded in the database (migration 014), so `outbox status` does not warn about them. */
  recorded: boolean;
  ms: number;
}

const refused = (message: string, details: Record<string, unknown>) => new OutboxError('TOPIC_GROWTH_REFUSED', message, { details });

/** Each partition's end offset, as a map partition → offset. */
async function endOffsets(admin: Admin, topic: string): Promise<Record<number, string>> {
  return Object.fromEntries((await admin.fetchTopicOffsets(topic)).map((p) => [p.partition, p.high]));
}

export async function growTopics(config: OutboxConfig, options: GrowOptions, deps: { admin?: Admin } = {}): Promise<GrowReport> {
  const t0 = Date.now();
  const { topics, partitions, groups, producer, settleMs = 3_000, timeoutMs = 300_000, logger } = options;
  if (topics.length === 0 || groups.length === 0) {
    throw refused('Name the topics to grow and every consumer group that reads them (--topic, --group): without the groups there is no way to know their old partitions were read to the end.', { topics, groups });
  }
  const admin = deps.admin ?? createKafka(config).admin();
  if (!deps.admin) await admin.connect();
  const connect = createConnectClient(config.connect);
  const name = config.connector.name;
  let stopped = false;
  try {
    const metadata = await admin.fetchTopicMetadata({ topics: [...topics] });
    const current = new Map(metadata.topics.map((t) => [t.name, t.partitions.length]));
    const tooFew = topics.filter((t) => (current.get(t) ?? 0) >= partitions);
    if (tooFew.length > 0) {
      throw refused(`Partitions can only be added: ${tooFew.map((t) => `${t} has ${current.get(t)}`).join(', ')}, not fewer than ${partitions}. Pass a larger --partitions.`, { topics: tooFew, partitions });
    }
    if (producer === 'connector') {
      await connect.stop(name);
      stopped = true;
      await waitFor(timeoutMs, `connector ${name} to stop`, async () => {
        const s = await connect.status(name);
        return s?.connector.state === 'STOPPED' && (s.tasks ?? []).length === 0;
      });
      logger?.info({ step: 'stop' }, `connector ${name} stopped (its events wait in the replication slot)`);
    }
    // What was written before the stop may still be on its way (a relay's last batch): settle first.
    const final = new Map<string, Record<number, string>>();
    for (const topic of topics) {
      let last = await endOffsets(admin, topic);
      let stableSince = Date.now();
      while (Date.now() - stableSince < settleMs) {
        await sleep(250);
        const now = await endOffsets(admin, topic);
        if (JSON.stringify(now) !== JSON.stringify(last)) {
          last = now;
          stableSince = Date.now();
        }
      }
      final.set(topic, last);
    }
    logger?.info({ step: 'settled' }, `end offsets settled: ${[...final].map(([t, o]) => `${t} ${JSON.stringify(o)}`).join('; ')}`);
    for (const groupId of groups) {
      await waitFor(timeoutMs, `group ${groupId} to commit past every partition's end`, async () => behind(admin, groupId, final).then((b) => b.length === 0), async () => {
        const lag = await behind(admin, groupId, final);
        return refused(
          `Consumer group ${groupId} did not apply everything written before the growth within ${timeoutMs / 1000} s (${lag.join(', ')}). ` +
            'Growing now could apply a key\'s new events before its old ones. Start or fix that consumer (or leave it out of --group if it no longer reads these topics), then run again.',
          { groupId, behind: lag },
        );
      });
      logger?.info({ step: 'group' }, `group ${groupId} has applied everything`);
    }
    await admin.createPartitions({ topicPartitions: topics.map((topic) => ({ topic, count: partitions })) });
    logger?.info({ step: 'grow' }, `${topics.join(', ')} now have ${partitions} partitions`);
    const recorded = await recordGrowth(config, topics, partitions, logger);
    return {
      recorded,
      topics: topics.map((topic) => ({ topic, from: current.get(topic) ?? 0, to: partitions, endOffsets: final.get(topic) ?? {} })),
      groups: [...groups],
      ...(stopped ? { stoppedConnector: name } : {}),
      ms: Date.now() - t0,
    };
  } finally {
    if (stopped) await connect.resume(name);
    if (!deps.admin) await admin.disconnect().catch(() => {});
  }
}

/** Records the grown topics' new count (a failure is a warning: the growth itself is done and safe). */
async function recordGrowth(config: OutboxConfig, topics: readonly string[], partitions: number, logger: Logger | undefined): Promise<boolean> {
  try {
    const done = await withAdmin(config, (db) => recordPartitions(db, config.outbox, new Map(topics.map((t) => [t, partitions])), 'topics:grow'));
    if (done !== null) return true;
    logger?.warn({ step: 'record' }, 'the new partition counts were not recorded: the database has no table for them (run `outbox db:provision`, migration 014); `outbox status` will warn about these topics until `outbox connector:deploy` records them');
  } catch (error) {
    logger?.warn({ step: 'record', err: { message: (error as Error).message } }, 'the new partition counts could not be recorded in the database; `outbox status` will warn about these topics until `outbox connector:deploy` records them');
  }
  return false;
}

/** The partitions `groupId` has not committed up to their final end offset, as `topic/partition: committed < end`. */
async function behind(admin: Admin, groupId: string, final: Map<string, Record<number, string>>): Promise<string[]> {
  const committed = await admin.fetchOffsets({ groupId, topics: [...final.keys()] });
  const out: string[] = [];
  for (const { topic, partitions } of committed) {
    for (const [partition, end] of Object.entries(final.get(topic) ?? {})) {
      const at = partitions.find((p) => p.partition === Number(partition))?.offset ?? '-1';
      if (BigInt(end) > 0n && BigInt(at) < BigInt(end)) out.push(`${topic}/${partition}: committed ${at === '-1' ? 'nothing' : at} < end ${end}`);
    }
  }
  return out;
}

async function waitFor(timeoutMs: number, what: string, done: () => Promise<boolean>, onTimeout?: () => Promise<OutboxError>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await done()) return;
    await sleep(250);
  }
  throw (await onTimeout?.()) ?? refused(`Timed out after ${timeoutMs / 1000} s waiting for ${what}.`, { what });
}
