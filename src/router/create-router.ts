import { Partitioners } from 'kafkajs';
import { createCodec, type EventMapShape } from '../codec';
import { createPool } from '../db';
import { createKafka, kafkaCredentialFailure } from '../kafka';
import { createLogger } from '../log';
import { createEmitter, createLifecycle, type ServiceStatus } from '../service';
import { createCredentialWatch } from './credential-watch';
import { createDlqTopics } from './dlq-topics';
import { resolveSettings, type RouterOptions } from './options';
import { runHousekeeping } from './housekeeping';
import { ParkedHints } from './parked';
import { createPruneGuard } from './prune-guard';
import { routerDeps } from './router-deps';
import { ROUTER_EVENT_LEVELS } from './router-events';
import { createRecordWaits, type RecordWait } from './record-waits';
import { COMMIT_INTERVAL_MS, commitOffsets, type RouterRuntime } from './runtime';
import { createSubscription, topicSelection } from './subscription';
import { assertNotDlqPattern, topicNames, type TopicNames } from '../topics';
import type { RouterStats } from './types';

export interface Router {
  /** Joins the group and starts consuming; resolves once the consumer runs. */
  start(): Promise<void>;
  /** Finishes the record in hand (a retry wait is cut short, the record left for the next run), commits offsets, leaves the group. */
  stop(): Promise<void>;
  stats(): Readonly<RouterStats>;
  /** For /healthz: started, and a member of its consumer group; the records held now waiting on the registry. */
  health(): { running: boolean; joined: boolean; waiting: RecordWait[] };
  /** For /readyz: running and joined to its group, not rebalancing (with no routed topic yet there is no group to join). */
  ready(): boolean;
  /** For /readyz's body: what is degraded without making the router unready (the inbox prune stopped, and why). */
  readyDetails(): Record<string, unknown>;
  /** Where the router is in its lifecycle. */
  status(): ServiceStatus;
}

/**
 * Routed topics → handlers, exactly once in effect (docs/router.md).
 *
 * Why eachBatch with manual resolveOffset: a record's offset is resolved only after its inbox
 * transaction has committed (or its dead letter is written), so a crash anywhere before leaves the
 * record to be redelivered, and the inbox turns the redelivery into a counted duplicate. Resolved
 * offsets are committed off the critical path: at most every COMMIT_INTERVAL_MS (between chunks, and by
 * a timer when the stream is idle), and at once when a batch ends revoked or stopping and when stop()
 * begins. Not kafkajs's autoCommit: it commits after every batch, a round trip to the coordinator
 * before the next fetch. Partitions run side by side
 * (`partitionsConsumedConcurrently`); inside one, records run in offset order, or in `lanes` by key
 * hash with each key in order; consecutive records share an inbox transaction (`maxTransactionRecords`).
 */
export function createRouter<M extends EventMapShape = EventMapShape>(typedOptions: RouterOptions<M>): Router {
  // The map only types the handlers the caller writes; at run time the router takes any handlers object.
  const options = typedOptions as unknown as RouterOptions;
  const settings = resolveSettings(options);
  const logger = options.logger ?? createLogger({ name: 'router' });
  const waits = createRecordWaits();
  const refusals = createCredentialWatch();
  // Topic names follow connector.topicReplacement: the routed pattern, each topic's aggregate type and DLQ.
  // Several outboxes' templates: each topic is named by the first template whose routed or dead-letter pattern it matches.
  const replacements = options.topicReplacements?.length ? options.topicReplacements : [options.config.connector.topicReplacement];
  const allNames = replacements.map((replacement) => topicNames(replacement));
  const names = allNames[0] as TopicNames;
  const namesOf = (topic: string): TopicNames => allNames.find((n) => n.pattern.test(topic) || n.dlqPattern.test(topic)) ?? names;
  const selection = topicSelection(options, allNames);
  // Refused before anything connects; the topics that exist are checked again at start().
  assertNotDlqPattern(selection.pattern);
  const rt: RouterRuntime = {
    options,
    settings,
    logger,
    kafka: options.kafka ?? createKafka(options.config, { logger }),
    stats: { received: 0, applied: 0, duplicates: 0, retries: 0, deadLettered: 0, skipped: 0, infrastructureRetries: 0 },
    events: createEmitter({ logger, levels: ROUTER_EVENT_LEVELS, listeners: [options.onEvent, waits.onEvent, refusals.onEvent] }),
    aggregateTypeOf: options.aggregateTypeOf ?? ((topic) => namesOf(topic).aggregateTypeOf(topic)),
    dlqTopicFor: options.dlqTopicFor ?? ((topic, aggregateType) => namesOf(topic).dlqFor(topic, aggregateType)),
    heartbeatIntervalMs: Math.max(500, Math.floor(settings.sessionTimeoutMs / 10)),
    signal: () => lifecycle.signal,
    running: () => lifecycle.state === 'running',
    joined: false,
    rebalancing: false,
    consuming: false,
    batchesInHand: 0,
    subscribed: new Set(),
    parkedHints: new ParkedHints(),
    refusals,
  };
  const codec = options.codec ?? createCodec({ registry: options.config.registry, topicFor: names.routed, schemasDir: settings.schemasDir, readerSchemas: options.readerSchemas });
  const dlqs = createDlqTopics(rt);
  const pruneGuard = createPruneGuard(() => rt.admin, settings, (name, data) => rt.events.emit(name, data));
  const subscription = createSubscription(rt, selection, dlqs, pruneGuard);
  let timers: NodeJS.Timeout[] = [];
  let housekeeping: Promise<void>[] = [];

  async function start(signal: AbortSignal): Promise<void> {
    rt.pool = options.pool ?? createPool(options.config.database, { application_name: `outbox-router:${settings.consumer}`, max: settings.poolSize }, (error) => logger.warn({ err: error.message }, 'router.db-idle-error'));
    rt.deps = routerDeps(rt, rt.pool, codec, dlqs);
    // Not idempotent (kafkajs wants endless retries for that): a rare duplicate dead letter is harmless,
    // since a replayed one goes through the inbox again.
    // No auto-creation: DLQ topics are created explicitly with their retention (createDlqTopics).
    rt.producer = rt.kafka.producer({ allowAutoTopicCreation: false, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner });
    rt.admin = rt.kafka.admin();
    try {
      await rt.producer.connect();
      await rt.admin.connect();
      const topics = await subscription.matchingTopics(true);
      // Checks the topics' retention against the inbox window first (prune-guard.ts).
      await subscription.startConsumer(topics);
    } catch (error) {
      // A refused SASL credential, ACL or certificate names the brokers, the principal and the fix.
      throw kafkaCredentialFailure(error, options.config.kafka, 'starting the router') ?? error;
    }
    housekeeping = runHousekeeping(rt, rt.pool, signal, pruneGuard);
    // An idle stream brings no batch: what the last one resolved is still committed within the interval.
    timers = [setInterval(() => void commitOffsets(rt, false), COMMIT_INTERVAL_MS)];
    for (const timer of timers) timer.unref();
    timers.push(...subscription.startRefreshing());
    const unknown = [settings.unknownEventType, ...Object.entries(settings.unknownEventTypes).map(([t, p]) => `${t}: ${p}`)].join(', ');
    const { consumer, groupId, unknownEventType, unknownEventTypes, dlqRetentionMs, inboxRetentionMs } = settings;
    const inboxRetentionMinimumMs = pruneGuard.minimumMs();
    logger.info(
      { event: 'router.started', consumer, groupId, topics: [...rt.subscribed], unknownEventType, unknownEventTypes, dlqRetentionMs, inboxRetentionMs, inboxRetentionMinimumMs },
      `router.started (event types without a handler: ${unknown})`,
    );
  }

  async function stop(): Promise<void> {
    for (const timer of timers) clearInterval(timer);
    timers = [];
    await subscription.idle();
    // The signal aborted when stop began: the prune stops after its statement in hand.
    await Promise.all(housekeeping);
    housekeeping = [];
    // kafkajs's disconnect waits for the batch in hand, commits resolved offsets and leaves the group.
    await rt.consumer?.disconnect().catch((e: Error) => logger.warn({ error: e.message }, 'router.stop: consumer disconnect failed'));
    await rt.producer?.disconnect().catch(() => {});
    await rt.admin?.disconnect().catch(() => {});
    if (!options.pool) await rt.pool?.end().catch(() => {});
    rt.consumer = rt.producer = rt.pool = rt.admin = rt.deps = rt.committer = undefined;
    rt.consuming = false;
    logger.info({ event: 'router.stopped', ...rt.stats }, 'router.stopped');
  }

  const lifecycle = createLifecycle('router', {
    start,
    // What is resolved now; the batch in hand commits what it finishes when it ends. Then the abort cuts
    // retry waits short: the record in hand is not resolved, so it is redelivered next time.
    beforeAbort: () => commitOffsets(rt, true),
    stop,
  });
  const health = () => ({
    running: rt.running(),
    joined: rt.running() && rt.consuming && rt.consumer !== undefined && (rt.joined || rt.subscribed.size === 0),
    waiting: waits.list(),
  });

  return {
    start: () => lifecycle.start(),
    stop: () => lifecycle.stop(),
    stats: () => ({ ...rt.stats }),
    health,
    // Not ready while a hop refuses the router's credentials: it consumes, but nothing gets applied.
    ready: () => health().joined && !rt.rebalancing && refusals.current() === undefined,
    // Reasons beside the status: a stopped inbox prune, and the records whose decode waits on the registry
    // (their partitions do not move). Neither makes the router unready: it still consumes the rest.
    readyDetails: () => {
      const block = pruneGuard.blocked();
      const waiting = waits.list();
      const refused = refusals.current();
      return {
        ...(refused ? { refused } : {}),
        ...(block ? { inboxPrune: { blocked: true, reasons: block.reasons, topics: block.topics, message: block.message } } : {}),
        ...(waiting.length ? { waiting } : {}),
      };
    },
    status: () => lifecycle.status(),
  };
}
