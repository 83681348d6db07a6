import type { Kafka } from 'kafkajs';
import { topicForReplacement, type TopicFor } from '../codec';
import { parse, type OutboxConfig } from '../config';
import { relaySchema, type RelayConfig } from '../config/relay-schema';
import { createPool } from '../db';
import { createLogger, type Logger } from '../log';
import { createEmitter, createLifecycle, type ServiceStatus } from '../service';
import { checkTable, connectKafka, joinShardGroup, listen } from './connect';
import { runHousekeeping } from './housekeeping';
import { createPublishHealth, type PublishHealthVerdict } from './publish-health';
import { RELAY_EVENT_LEVELS } from './relay-events';
import type { RelayRuntime } from './runtime';
import { createSender } from './sender';
import { buildRelaySql, lockNamespaces } from './sql';
import type { RelayEventListener, RelayStats } from './types';
import { createWakeSignal, relayChannel } from './wake';
import { runWorker } from './worker';

export interface RelayOptions {
  /** Database, outbox table, brokers, topic naming (connector.topicReplacement) and `relay` settings. */
  config: OutboxConfig;
  /** Overrides of config.relay (the CLI flags, tests); validated like the config. */
  settings?: Partial<RelayConfig>;
  /** Topic of an aggregate type; default the connector's route.topic.replacement, as CDC routes. */
  topicFor?: TopicFor;
  /** A kafkajs client (tests inject faults through its socketFactory); default createKafka(config, { role: 'relay' }). */
  kafka?: Kafka;
  logger?: Logger;
  onEvent?: RelayEventListener;
  /** Tests: deterministic jitter. */
  random?: () => number;
}

export interface Relay {
  /** Checks the table, joins the shard group, connects to Kafka and starts the workers. */
  start(): Promise<void>;
  /** Finishes every worker's batch in hand (published rows are marked, nothing is lost), then disconnects. */
  stop(): Promise<void>;
  stats(): Readonly<RelayStats>;
  /** For /healthz (relayHealthBody): `publishing` says whether rows still reach Kafka. */
  health(): { running: boolean; workers: number; listening: boolean; publishing: PublishHealthVerdict };
  /** For /readyz: running, and every shard's last poll worked. */
  ready(): boolean;
  status(): ServiceStatus;
  /** The resolved settings. */
  readonly settings: Readonly<RelayConfig>;
}

/**
 * The polling publisher (docs/relay.md): N workers, one per shard `hashtext(aggregate_id) mod N`. Each
 * loop is one transaction: take the shard's advisory xact lock, claim the oldest unpublished rows of
 * the shard (`published_at IS NULL`, never an id cursor) FOR UPDATE SKIP LOCKED, publish them (acks=all)
 * and only then mark them published, and commit. A crash before the commit leaves them unpublished:
 * at-least-once, never lost.
 */
export function createRelay(options: RelayOptions): Relay {
  const { config } = options;
  const settings = Object.freeze(parse(relaySchema, { ...config.relay, ...options.settings }, { heading: 'Invalid relay settings; the relay did not start', prefix: 'relay.' }));
  const logger = options.logger ?? createLogger({ name: 'relay' });
  const rt: RelayRuntime = {
    options,
    config,
    settings,
    logger,
    events: createEmitter({ logger, levels: RELAY_EVENT_LEVELS, listeners: [options.onEvent] }),
    stats: { published: 0, failed: 0, batches: 0, emptyClaims: 0, queries: 0, deleted: 0, lagSeconds: 0, blockedKeys: 0, backlog: 0, backlogCapped: false, dbErrors: 0, wakes: 0 },
    topicFor: options.topicFor ?? topicForReplacement(config.connector.topicReplacement),
    sql: buildRelaySql(config.outbox.schema, config.outbox.table),
    ns: lockNamespaces(config.outbox.schema, config.outbox.table),
    backoff: { initialDelayMs: settings.retryInitialDelayMs, maxDelayMs: settings.retryMaxDelayMs },
    random: options.random ?? Math.random,
    wake: createWakeSignal(),
    channel: relayChannel(config.outbox.schema, config.outbox.table),
    blocks: [],
    failing: new Set(),
    publishHealth: createPublishHealth({ unhealthyAfterMs: settings.unhealthyAfterMs }),
  };
  const sender = createSender(rt);
  let loops: Promise<void>[] = [];

  async function start(signal: AbortSignal): Promise<void> {
    sender.forget();
    rt.failing.clear();
    rt.pool = createPool(
      config.database,
      { application_name: 'outbox-relay', max: settings.poolSize + 1 }, // + lag and cleanup
      (error) => logger.warn({ event: 'relay.db-idle-error', error: error.message }, 'relay.db-idle-error'),
    );
    await checkTable(rt);
    await joinShardGroup(rt);
    await connectKafka(rt);
    await listen(rt);
    loops = [...Array.from({ length: settings.workers }, (_, shard) => runWorker(rt, sender, shard, signal)), ...runHousekeeping(rt, signal)];
    const { workers, batchSize, maxBatchBytes, pollIntervalMs, notify } = settings;
    rt.events.emit('relay.started', { workers, batchSize, maxBatchBytes, pollIntervalMs, notify, table: `${config.outbox.schema}.${config.outbox.table}` });
  }

  async function stop(): Promise<void> {
    await rt.listener?.stop();
    rt.listener = undefined;
    await Promise.allSettled(loops);
    loops = [];
    await rt.producer?.disconnect().catch(() => {});
    await rt.admin?.disconnect().catch(() => {});
    await rt.member?.end().catch(() => {});
    await rt.pool?.end().catch(() => {});
    rt.member = rt.pool = rt.producer = rt.admin = undefined;
  }

  const lifecycle = createLifecycle('relay', { start, stop });
  const running = () => lifecycle.state === 'running';
  /** The stop in progress: relay.stopped is emitted once per stop. */
  let stopping: Promise<void> | undefined;
  return {
    settings,
    start: () => lifecycle.start(),
    stop() {
      if (!stopping && (lifecycle.state === 'running' || lifecycle.state === 'starting')) {
        stopping = lifecycle
          .stop()
          .then(() => rt.events.emit('relay.stopped', { ...rt.stats }))
          .finally(() => (stopping = undefined));
      }
      return stopping ?? lifecycle.stop();
    },
    stats: () => ({ ...rt.stats, blockedKeys: rt.blocks.reduce((n, b) => n + (b?.size() ?? 0), 0) }),
    health: () => ({ running: running(), workers: settings.workers, listening: rt.listener?.listening() ?? false, publishing: rt.publishHealth.verdict() }),
    ready: () => running() && rt.failing.size === 0,
    status: () => lifecycle.status(),
  };
}

/**
 * The /healthz answer of a relay: healthy while it runs and rows still reach Kafka, i.e. not every
 * publish (or every claim) has failed for relay.unhealthyAfterMs (publish-health.ts). An idle relay is healthy.
 */
export function relayHealthBody(relay: Pick<Relay, 'health' | 'stats'>): { healthy: boolean; details: Record<string, unknown> } {
  const h = relay.health();
  return { healthy: h.running && h.publishing.healthy, details: { ...h, stats: relay.stats() } };
}
