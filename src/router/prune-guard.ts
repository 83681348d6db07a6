import type { Admin } from 'kafkajs';
import { pruneBlock, safeInboxRetention, topicRetentions, type PruneBlock, type PruneSettings } from './inbox-retention';

export interface PruneGuard {
  /** Adds routed topics (subscribed now or about to be) and checks them all; never throws. */
  watch(topics: Iterable<string>): Promise<PruneBlock | undefined>;
  /** Checks the watched topics again (each prune run: a setting may have changed either way); never throws. */
  check(): Promise<PruneBlock | undefined>;
  /** Why pruning stopped, as of the last check (undefined: it runs). */
  blocked(): PruneBlock | undefined;
  /** The safe minimum of the last check that found one (ms), for the start-up log. */
  minimumMs(): number | undefined;
}

/**
 * The router's retention check. Every routed topic is checked when it is subscribed (at start and when a
 * refresh adds one) and again before each prune run. While any is unsafe (too short a window, compacted,
 * kept forever, or settings unreadable) the router prunes nothing and keeps consuming: it says why with
 * `router.inbox-prune-blocked` at each check (the readiness detail and the metric follow it) and resumes,
 * with `router.inbox-prune-resumed`, once the check passes.
 */
export function createPruneGuard(admin: () => Admin | undefined, settings: PruneSettings, emit: (name: 'router.inbox-prune-blocked' | 'router.inbox-prune-resumed', data: Record<string, unknown>) => void): PruneGuard {
  const watched = new Set<string>();
  let current: PruneBlock | undefined;
  let minimum: number | undefined;
  // One check at a time, each of every watched topic: the last one to finish is the newest state.
  let chain: Promise<PruneBlock | undefined> = Promise.resolve(undefined);

  async function run(): Promise<PruneBlock | undefined> {
    const client = admin();
    // A deleted topic redelivers nothing, and kafkajs fails a whole DescribeConfigs on one missing topic
    // (every topic would read as unknown and pruning would stop for good): stop watching it. A topic
    // created again under its name is watched again when the router subscribes it.
    let existing: Set<string> | undefined;
    try {
      existing = client ? new Set(await client.listTopics()) : undefined;
    } catch {
      existing = undefined; // unknown: keep watching all of them (DescribeConfigs then says what it can)
    }
    if (existing) for (const t of watched) if (!existing.has(t)) watched.delete(t);
    const topics = [...watched].sort();
    const { retentions, error } = client ? await topicRetentions(client, topics) : { retentions: topics.map((topic) => ({ topic, retentionMs: null, segmentMs: null })), error: 'no Kafka admin client' };
    const block = pruneBlock(settings.inboxRetentionMs, settings.dlqReplayHorizonMs, retentions, settings.allowShortInboxRetention, error);
    const check = safeInboxRetention(retentions, settings.dlqReplayHorizonMs);
    minimum = Number.isFinite(check.minimumMs) ? check.minimumMs : undefined;
    if (block) emit('router.inbox-prune-blocked', { code: 'INBOX_RETENTION_TOO_SHORT', reasons: block.reasons, topics: block.topics, error: block.message });
    else if (current) emit('router.inbox-prune-resumed', { topics: topics.length, minimumMs: check.minimumMs });
    current = block;
    return block;
  }

  const check = (): Promise<PruneBlock | undefined> => {
    if (settings.inboxRetentionMs === 0) return Promise.resolve(undefined);
    chain = chain.then(run, run);
    return chain;
  };
  return {
    watch: (topics) => {
      for (const t of topics) watched.add(t);
      return check();
    },
    check,
    blocked: () => current,
    minimumMs: () => minimum,
  };
}
