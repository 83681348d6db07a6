import type { Admin, Consumer } from 'kafkajs';
import { retryUntil } from '../service';
import { eachBatch } from './consume-batch';
import type { DlqTopics } from './dlq-topics';
import { COMMIT_INTERVAL_MS, commitOffsets, type RouterRuntime } from './runtime';
import { assertNotDlqPattern, topicNames } from '../topics';

export interface Subscription {
  /** Routed topics matching the pattern; `check`: refuse a pattern that matches a dead-letter topic. */
  matchingTopics(check: boolean): Promise<Set<string>>;
  /** A new consumer for `topics`: connected, subscribed and running. */
  startConsumer(topics: Set<string>): Promise<void>;
  /** Subscribes routed topics that appeared since (a re-subscribe); never throws. */
  refreshTopics(): Promise<void>;
  /** Resolves once no refresh is running. */
  idle(): Promise<void>;
}

/** The router's consumer and its topics: a pattern matched at start and every topicRefreshMs. */
export function createSubscription(rt: RouterRuntime, topicPattern: RegExp, dlqs: DlqTopics): Subscription {
  const { settings, logger } = rt;

  /** Dead-letter topics are never among them (see assertNotDlqPattern). */
  async function matchingTopics(check: boolean): Promise<Set<string>> {
    const all = await (rt.admin as Admin).listTopics();
    const matches = all.filter((t) => topicPattern.test(t));
    const dlqTopics = new Set([...all.filter(topicNames().isDlq), ...matches.map((t) => rt.dlqTopicFor(t, rt.aggregateTypeOf(t)))]);
    if (check) assertNotDlqPattern(topicPattern, [...dlqTopics]);
    return new Set(matches.filter((t) => !dlqTopics.has(t)).sort());
  }

  async function startConsumer(topics: Set<string>): Promise<void> {
    const c = newConsumer(rt);
    rt.consumer = c;
    rt.committer = undefined;
    rt.joined = false;
    rt.rebalancing = false;
    try {
      await c.connect();
      // Best effort here; sendDeadLetter makes sure again before the first dead letter.
      await dlqs.ensureFor([...topics]).catch((e: Error) => logger.warn({ event: 'router.dlq-create-failed', error: e.message }, 'router: could not create the dead-letter topics yet; will try before the first dead letter'));
      rt.subscribed = topics;
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
        logger.warn({ event: 'router.no-topics', pattern: String(topicPattern) }, 'no routed topics yet; waiting for the first one');
      }
      rt.consuming = true;
    } catch (error) {
      if (rt.consumer === c) rt.consumer = undefined;
      await c.disconnect().catch(() => {});
      throw error;
    }
  }

  let refreshing: Promise<void> | undefined;

  async function resubscribe(topics: Set<string>): Promise<void> {
    const added = [...topics].filter((t) => !rt.subscribed.has(t));
    if (added.length === 0 || !rt.running()) return;
    rt.events.emit('router.topics-changed', { added, topics: topics.size });
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

  async function refreshTopics(): Promise<void> {
    if (refreshing || !rt.running()) return;
    refreshing = (async () => {
      try {
        await resubscribe(await matchingTopics(false));
      } catch (error) {
        logger.warn({ event: 'router.topics-refresh-failed', error: (error as Error).message }, 'router: could not refresh the topic list; will try again');
      }
    })().finally(() => (refreshing = undefined));
    await refreshing;
  }

  return { matchingTopics, startConsumer, refreshTopics, idle: async () => void (await refreshing) };
}

/** A consumer of the router's group whose events keep RouterRuntime's membership flags. */
function newConsumer(rt: RouterRuntime): Consumer {
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
    // A hook for what must follow an assignment (e.g. reloading state for the partitions now owned).
    rt.events.emit('router.group-join', { groupId: e.payload.groupId, memberId: e.payload.memberId, assignment: e.payload.memberAssignment });
  });
  c.on(c.events.REBALANCING, () => {
    if (rt.consumer === c) rt.rebalancing = true;
  });
  c.on(c.events.CRASH, (e) => {
    // kafkajs restarts itself after a retriable crash; until it rejoins, the router is not healthy.
    if (rt.consumer === c) rt.joined = false;
    logger.error({ event: 'router.crash', error: e.payload.error?.message, restart: e.payload.restart }, 'router.crash');
  });
  c.on(c.events.STOP, () => {
    if (rt.consumer === c) rt.joined = false;
  });
  return c;
}
