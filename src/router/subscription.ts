import type { Admin, Consumer } from 'kafkajs';
import { kafkaCredentialFailure } from '../kafka';
import { backoffDelay, sleepUnlessAborted } from '../retry';
import { retryUntil } from '../service';
import { eachBatch } from './consume-batch';
import type { DlqTopics } from './dlq-topics';
import type { RouterOptions } from './options';
import type { PruneGuard } from './prune-guard';
import { COMMIT_INTERVAL_MS, commitOffsets, type RouterRuntime } from './runtime';
import { assertNotDlqPattern, exactTopicsPattern, topicNames, type TopicNames } from '../topics';

/** How often the router looks for the handlers' topics that do not exist yet (one metadata request). */
export const MISSING_TOPIC_CHECK_MS = 1_000;

/** What the router consumes: a pattern, and for the default, the exact topic names behind it. */
export interface TopicSelection {
  pattern: RegExp;
  /** The routed topics of the handlers' aggregate types (the default); undefined for an explicit pattern. */
  wanted?: readonly string[];
}

/**
 * An explicit `topics` pattern as given; by default the routed topics of the aggregate types the handlers
 * name (through connector.topicReplacement), never every routed topic: a router reading the topics of
 * types it has no handler for would dead-letter all their events (HANDLER_NOT_FOUND) into the DLQ topics
 * their real consumers share, and park their keys.
 */
export function topicSelection(options: Pick<RouterOptions, 'topics' | 'handlers'>, names: TopicNames | readonly TopicNames[]): TopicSelection {
  if (options.topics) return { pattern: options.topics };
  const templates = Array.isArray(names) ? (names as readonly TopicNames[]) : [names as TopicNames];
  const wanted = [...new Set(templates.flatMap((n) => Object.keys(options.handlers).map((type) => n.routed(type))))].sort();
  return { pattern: exactTopicsPattern(wanted), wanted };
}

export interface Subscription {
  /** Routed topics matching the pattern; `check`: refuse a pattern that matches a dead-letter topic. */
  matchingTopics(check: boolean): Promise<Set<string>>;
  /** A new consumer for `topics`: connected, subscribed and running. */
  startConsumer(topics: Set<string>): Promise<void>;
  /** Subscribes routed topics that appeared since (a re-subscribe); `by` names the check in the event; never throws. */
  refreshTopics(by?: string): Promise<void>;
  /** Resolves once no refresh is running. */
  idle(): Promise<void>;
  /** The timers that refresh the topics (none with topicRefreshMs 0); the caller clears them. */
  startRefreshing(): NodeJS.Timeout[];
}

/**
 * The router's consumer and its topics. An explicit pattern is matched at start and every topicRefreshMs;
 * the default's exact names, while some do not exist yet, every MISSING_TOPIC_CHECK_MS, so the first
 * events of a new aggregate type wait about a second, not a whole refresh. Every topic is given to the
 * prune guard before it is subscribed.
 */
export function createSubscription(rt: RouterRuntime, selection: TopicSelection, dlqs: DlqTopics, guard: PruneGuard): Subscription {
  const { settings, logger } = rt;
  const topicPattern = selection.pattern;
  const missing = () => (selection.wanted ?? []).filter((t) => !rt.subscribed.has(t));
  /**
   * Each subscribed topic's partition count when its consumer started. kafkajs sees partitions added to a
   * subscribed topic only when its metadata expires (metadataMaxAge, 5 min): until then nobody reads them
   * (`outbox topics:grow` waits for the group before growing, but the new partitions' events would wait).
   */
  const partitionCounts = new Map<string, number>();
  const countPartitions = async (topics: Iterable<string>): Promise<Map<string, number>> => {
    const list = [...topics];
    if (list.length === 0) return new Map();
    const { topics: metadata } = await (rt.admin as Admin).fetchTopicMetadata({ topics: list });
    return new Map(metadata.map((t) => [t.name, t.partitions.length]));
  };

  /** Dead-letter topics are never among them (see assertNotDlqPattern). */
  async function matchingTopics(check: boolean): Promise<Set<string>> {
    const all = await (rt.admin as Admin).listTopics();
    const matches = all.filter((t) => topicPattern.test(t));
    const dlqTopics = new Set([...all.filter(topicNames().isDlq), ...matches.map((t) => rt.dlqTopicFor(t, rt.aggregateTypeOf(t)))]);
    if (check) assertNotDlqPattern(topicPattern, [...dlqTopics]);
    return new Set(matches.filter((t) => !dlqTopics.has(t)).sort());
  }

  async function startConsumer(topics: Set<string>): Promise<void> {
    const c = newConsumer(rt, () => void restartAfterCrash(c), () => (restarts = 0));
    rt.consumer = c;
    rt.committer = undefined;
    rt.joined = false;
    rt.rebalancing = false;
    try {
      await c.connect();
      // Best effort here; sendDeadLetter makes sure again before the first dead letter.
      await dlqs.ensureFor([...topics]).catch((e: Error) => logger.warn({ event: 'router.dlq-create-failed', error: e.message }, 'router: could not create the dead-letter topics yet; will try before the first dead letter'));
      // Before the first record: a topic whose records live longer than the inbox window stops the prune.
      await guard.watch(topics);
      rt.subscribed = topics;
      partitionCounts.clear();
      for (const [topic, count] of await countPartitions(topics).catch(() => new Map<string, number>())) partitionCounts.set(topic, count);
      // An explicit list, not the pattern: kafkajs resolves a pattern once, at subscribe. New topics are
      // found by refreshTopics() and picked up by re-subscribing (a short rebalance, no restart).
      if (topics.size > 0) {
        await c.subscribe({ topics: [...topics], fromBeginning: settings.fromBeginning });
        await c.run({
          eachBatchAutoResolve: false,
          autoCommit: false,
          autoCommitInterval: COMMIT_INTERVAL_MS,
          partitionsConsumedConcurrently: settings.partitionsConsumedConcurrently,
          eachBatch: (payload) => eachBatch(rt, payload, c),
        });
      } else {
        const waiting = selection.wanted ? `the handlers' topics (${selection.wanted.join(', ')}) do not exist yet; checking every ${MISSING_TOPIC_CHECK_MS} ms` : 'no routed topics yet; waiting for the first one';
        logger.warn({ event: 'router.no-topics', pattern: String(topicPattern) }, waiting);
      }
      rt.consuming = true;
    } catch (error) {
      if (rt.consumer === c) rt.consumer = undefined;
      await c.disconnect().catch(() => {});
      throw error;
    }
  }

  let refreshing: Promise<void> | undefined;
  /** Consumers started again after a refusal since the last group join: the backoff's step. */
  let restarts = 0;

  /**
   * kafkajs gives up on a consumer after a failure it holds not retriable (SASL authentication failed,
   * GROUP_/TOPIC_AUTHORIZATION_FAILED, a certificate refused every time): the router would consume nothing
   * until restarted. Instead a new consumer is started with backoff until the credential or ACL is
   * fixed. Offsets resolved are only ever those applied, so the new member resumes after them.
   */
  async function restartAfterCrash(crashed: Consumer): Promise<void> {
    // Not rt.running(): the first join happens inside consumer.run(), while start() is still in hand.
    const signal = rt.signal();
    if (rt.consumer !== crashed || signal.aborted) return;
    rt.consumer = undefined;
    rt.consuming = false;
    await crashed.disconnect().catch(() => {});
    // The new consumer starts at once but may be refused again only when it joins: back off between crashes.
    if (!(await sleepUnlessAborted(backoffDelay(++restarts, settings.infrastructureBackoff, rt.options.random), signal))) return;
    const topics = new Set(rt.subscribed);
    await retryUntil(() => startConsumer(topics), {
      signal,
      backoff: settings.infrastructureBackoff,
      random: rt.options.random,
      onRetry: (failure, attempt, delayMs) => {
        rt.stats.infrastructureRetries++;
        const refused = kafkaCredentialFailure(failure, rt.options.config.kafka, 'joining the consumer group');
        if (refused) rt.refusals.failed(refused);
        logger.error({ event: 'router.consumer-restart-failed', code: refused?.code, error: (refused ?? (failure as Error)).message, attempt, delayMs }, 'router: the consumer could not start again; consuming nothing until it does, retrying');
      },
    });
  }

  async function resubscribe(topics: Set<string>, by: string): Promise<void> {
    const added = [...topics].filter((t) => !rt.subscribed.has(t));
    const counts = await countPartitions(rt.subscribed);
    const grown = [...counts].filter(([topic, count]) => count > (partitionCounts.get(topic) ?? count)).map(([topic]) => topic);
    if ((added.length === 0 && grown.length === 0) || !rt.running()) return;
    rt.events.emit('router.topics-changed', { added, ...(grown.length ? { grown } : {}), topics: topics.size, by });
    const old = rt.consumer;
    rt.consumer = undefined;
    rt.consuming = false;
    // Finishes the batch in hand and commits its offsets before the new subscription joins.
    await commitOffsets(rt, true);
    await old?.disconnect().catch((e: Error) => logger.warn({ error: e.message }, 'router: consumer disconnect before re-subscribe failed'));
    // The old consumer is gone: until a new one runs the router consumes nothing (and says so on
    // /healthz), so this is retried until it works or the router stops.
    await retryUntil(() => startConsumer(topics), {
      signal: rt.signal(),
      backoff: settings.infrastructureBackoff,
      random: rt.options.random,
      onRetry: (error, attempt, delayMs) => {
        rt.stats.infrastructureRetries++;
        logger.error({ event: 'router.resubscribe-failed', error: (error as Error).message, attempt, delayMs }, 'router: re-subscribing failed; consuming nothing until it works, retrying');
      },
    });
  }

  async function refreshTopics(by = 'refresh'): Promise<void> {
    if (refreshing || !rt.running()) return;
    refreshing = (async () => {
      try {
        await resubscribe(await matchingTopics(false), by);
      } catch (error) {
        logger.warn({ event: 'router.topics-refresh-failed', error: (error as Error).message }, 'router: could not refresh the topic list; will try again');
      }
    })().finally(() => (refreshing = undefined));
    await refreshing;
  }

  function startRefreshing(): NodeJS.Timeout[] {
    if (settings.topicRefreshMs === 0) return [];
    // The exact names: nothing else can appear, so only the missing ones are looked for, and often.
    const timer = selection.wanted
      ? setInterval(() => void (missing().length > 0 && refreshTopics('missing-topic-check')), Math.min(MISSING_TOPIC_CHECK_MS, settings.topicRefreshMs))
      : setInterval(() => void refreshTopics(), settings.topicRefreshMs);
    timer.unref();
    if (!selection.wanted) return [timer];
    // The exact names' partition counts, on the slower period (the pattern's refresh above checks them).
    const partitions = setInterval(() => void refreshTopics('partition-check'), settings.topicRefreshMs);
    partitions.unref();
    return [timer, partitions];
  }

  return { matchingTopics, startConsumer, refreshTopics, idle: async () => void (await refreshing), startRefreshing };
}

/** A consumer of the router's group whose events keep RouterRuntime's membership flags; `gaveUp`: kafkajs crashed it for good. */
function newConsumer(rt: RouterRuntime, gaveUp: () => void, joined: () => void): Consumer {
  const { settings, logger } = rt;
  const c = rt.kafka.consumer({
    groupId: settings.groupId,
    maxWaitTimeInMs: settings.maxWaitTimeInMs,
    sessionTimeout: settings.sessionTimeoutMs,
    heartbeatInterval: rt.heartbeatIntervalMs,
    allowAutoTopicCreation: false,
    // read_committed (kafkajs's default, stated): with connector.exactlyOnce, a Connect task that dies
    // mid-transaction leaves records of an aborted transaction in the log; only committed ones are events.
    // A record of an open transaction is held back until its commit (the last stable offset).
    readUncommitted: false,
  });
  c.on(c.events.GROUP_JOIN, (e) => {
    if (rt.consumer !== c) return;
    rt.joined = true;
    rt.rebalancing = false;
    joined();
    // A hook for what must follow an assignment (e.g. reloading state for the partitions now owned).
    rt.events.emit('router.group-join', { groupId: e.payload.groupId, memberId: e.payload.memberId, assignment: e.payload.memberAssignment });
  });
  c.on(c.events.REBALANCING, () => {
    if (rt.consumer === c) rt.rebalancing = true;
  });
  c.on(c.events.CRASH, (e) => {
    // kafkajs restarts itself after a retriable crash; until it rejoins, the router is not healthy.
    if (rt.consumer === c) rt.joined = false;
    const refused = kafkaCredentialFailure(e.payload.error, rt.options.config.kafka, 'consuming');
    if (refused && rt.consumer === c) rt.refusals.failed(refused);
    logger.error({ event: 'router.crash', code: refused?.code, error: (refused ?? e.payload.error)?.message, restart: e.payload.restart }, 'router.crash');
    // Only a refusal is restarted from: anything else kafkajs gave up on (DLQ_REJECTED) stops consuming as designed.
    if (!e.payload.restart && refused) gaveUp();
  });
  c.on(c.events.STOP, () => {
    if (rt.consumer === c) rt.joined = false;
  });
  return c;
}
