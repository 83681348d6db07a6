import type { OutboxConfig } from '../config';
import { createKafka, kafkaCredentialFailure } from '../kafka';
import type { Logger } from '../log';
import { topicNames } from '../topics';
import { STACK_HOST, STACK_PORTS } from '../config/local-stack';
import { describeError, maskUrl, withTimeout } from './format';
import { DEFAULT_OUTBOX_WARN_AGE_MS, DEFAULT_OUTBOX_WARN_BYTES, readOutboxTable } from './outbox-table';
import { DEFAULT_PARKED_LIMIT, readParked } from './parked';
import { readTopicPartitions } from './topic-partitions';
import { readConnector, readDlq, readGroups, readSlots, readStack, readWatchdog, sharedAdmin, watchdogBase } from './sections';
import type { Section, StatusReport } from './types';
import { computeVerdict } from './verdict';

export const DEFAULT_STATUS_TIMEOUT_MS = 3_000;
export const DEFAULT_LAG_WARN = 1_000;
export const DEFAULT_GROUP = 'outbox-router';
export const DEFAULT_WATCHDOG_URL = `http://${STACK_HOST}:${STACK_PORTS.watchdogMetrics}`;

/** The watchdog's HTTP server as configured (watchdog.metricsHost/Port); a wildcard address is reached on loopback. */
export function watchdogUrlOf(config: Pick<OutboxConfig, 'watchdog'>): string {
  const { metricsHost, metricsPort } = config.watchdog;
  const host = metricsHost === '0.0.0.0' || metricsHost === '::' ? STACK_HOST : metricsHost.includes(':') ? `[${metricsHost}]` : metricsHost;
  return `http://${host}:${metricsPort}`;
}

export interface StatusOptions {
  /** Each section's own time limit (ms); default 3000. */
  timeoutMs?: number;
  /** A group's lag on one topic above this many records is a warning; default 1000. */
  lagWarn?: number;
  /** Consumer groups always shown; default ['outbox-router'] (the router's default group). */
  groups?: readonly string[];
  /** The watchdog's HTTP server (its /healthz is read); default http://127.0.0.1:9465. */
  watchdogUrl?: string;
  /** Routed topics whose consumer groups are listed; default from connector.topicReplacement (^outbox\.event\..+$). */
  topics?: RegExp;
  /** Dead-letter topics; default the routed pattern with outbox.event. → outbox.dlq. (^outbox\.dlq\..+$). */
  dlqTopics?: RegExp;
  /** Parked keys listed at most (the most events first); the totals count them all. Default 10. */
  parkedLimit?: number;
  /** Parked keys are a warning when more than this many are parked; default 0 (any). */
  parkedWarnKeys?: number;
  /** …or when the oldest was parked longer ago than this (ms); default: no age rule. */
  parkedWarnAgeMs?: number;
  /** The outbox's oldest waiting row older than this (ms) is a warning; default 15 minutes. */
  outboxWarnAgeMs?: number;
  /** The outbox table larger than this (bytes, indexes included) is a warning; default 1 GiB. */
  outboxWarnBytes?: number;
  /** More waiting outbox rows than this is a warning; default: no such rule. */
  outboxWarnPending?: number;
  logger?: Logger;
}

/** `outbox.event.${routedByValue}` → /^outbox\.event\..+$/: the topics the connector routes to (src/topics). */
export function routedTopicPattern(config: Pick<OutboxConfig, 'connector'>): RegExp {
  return topicNames(config.connector.topicReplacement).pattern;
}

/** The router's dead-letter naming (src/topics): outbox.event.<type> → outbox.dlq.<type>, keeping any prefix. */
export function dlqTopicPattern(config: Pick<OutboxConfig, 'connector'>): RegExp {
  return topicNames(config.connector.topicReplacement).dlqPattern;
}

async function section<T>(name: string, timeoutMs: number, hint: string, log: Logger | undefined, read: () => Promise<T>): Promise<Section<T>> {
  const started = Date.now();
  try {
    const data = await withTimeout(timeoutMs, read, hint);
    log?.debug({ section: name, ms: Date.now() - started }, `status: ${name} read`);
    return { ...data, ok: true, ms: Date.now() - started };
  } catch (error) {
    log?.debug({ section: name, ms: Date.now() - started, err: error }, `status: ${name} unreadable`);
    return { ok: false, ms: Date.now() - started, error: describeError(error, hint) };
  }
}

/**
 * Reads every section at once, each with its own time limit, so one unreachable system shows as
 * `ok: false` with the reason instead of failing the whole report. Read-only everywhere.
 */
export async function collectStatus(config: OutboxConfig, options: StatusOptions = {}): Promise<StatusReport> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_STATUS_TIMEOUT_MS;
  const lagWarn = options.lagWarn ?? DEFAULT_LAG_WARN;
  const groupsGiven = options.groups !== undefined && options.groups.length > 0;
  const groups = groupsGiven ? [...new Set(options.groups)] : [config.router.groupId ?? config.router.consumer ?? DEFAULT_GROUP];
  const watchdogUrl = watchdogBase(options.watchdogUrl ?? watchdogUrlOf(config));
  const topics = options.topics ?? routedTopicPattern(config);
  const dlqTopics = options.dlqTopics ?? dlqTopicPattern(config);
  const parkedLimit = options.parkedLimit ?? DEFAULT_PARKED_LIMIT;
  const log = options.logger;

  const kafkaHint = `Check that Kafka answers at ${config.kafka.brokers.join(',')} (KAFKA_BROKERS; \`npm run stack:up\` for the local stack).`;
  const statusKafka = () =>
    createKafka(config, {
      role: 'status',
      overrides: { connectionTimeout: timeoutMs, requestTimeout: timeoutMs, retry: { retries: 1, initialRetryTime: 100, maxRetryTime: 1_000 } },
    });
  const admin = sharedAdmin(statusKafka);
  // Its own client: kafkajs keeps one set of metadata target topics per client, and this section's
  // metadata request for the routed topics, run beside the DLQ section's offsets on the same client, made
  // that one fail ("Cannot destructure property 'partitions' of 'low.pop(...)'").
  const partitionsAdmin = sharedAdmin(statusKafka);
  // A refused credential, ACL or certificate is its own error (naming the principal and the fix), not "check that Kafka answers".
  const kafkaRead =
    <T>(what: string, read: () => Promise<T>) =>
    async (): Promise<T> => {
      try {
        return await read();
      } catch (error) {
        throw kafkaCredentialFailure(error, config.kafka, what) ?? error;
      }
    };
  const db = config.database;
  const dbHint = `Check that PostgreSQL answers at ${db.host}:${db.port} (PGHOST/PGPORT; \`npm run stack:up\` for the local stack).`;
  try {
    const [stack, connector, slots, consumerGroups, dlq, parked, outboxTable, topicPartitions, watchdog] = await Promise.all([
      section('stack', timeoutMs, 'Run `outbox stack status` for details.', log, () => readStack(config)),
      section(
        'connector',
        timeoutMs,
        `Check that Kafka Connect answers at ${maskUrl(config.connect.url)} (OUTBOX_CONNECT_URL; \`npm run stack:up\` for the local stack).`,
        log,
        () => readConnector(config, timeoutMs),
      ),
      section('slots', timeoutMs, dbHint, log, () => readSlots(config, timeoutMs)),
      section('consumerGroups', timeoutMs, kafkaHint, log, kafkaRead('reading consumer groups', async () => readGroups(await admin.get(), groups, topics))),
      section('dlq', timeoutMs, kafkaHint, log, kafkaRead('reading the dead-letter topics', async () => readDlq(await admin.get(), dlqTopics))),
      section('parked', timeoutMs, dbHint, log, () => readParked(config, timeoutMs, parkedLimit)),
      section('outboxTable', timeoutMs, dbHint, log, () => readOutboxTable(config, timeoutMs)),
      section('topicPartitions', timeoutMs, `${kafkaHint} ${dbHint}`, log, kafkaRead('reading the routed topics\' partitions', async () => readTopicPartitions(config, await partitionsAdmin.get(), timeoutMs))),
      section('watchdog', timeoutMs, `Check the watchdog at ${maskUrl(watchdogUrl)} (--watchdog-url).`, log, () => readWatchdog(watchdogUrl, timeoutMs)),
    ]);
    const options_ = {
      timeoutMs,
      parkedLimit,
      lagWarn,
      parkedWarnKeys: options.parkedWarnKeys ?? 0,
      parkedWarnAgeMs: options.parkedWarnAgeMs ?? null,
      groups,
      groupsGiven,
      outboxWarnAgeMs: options.outboxWarnAgeMs ?? DEFAULT_OUTBOX_WARN_AGE_MS,
      outboxWarnBytes: options.outboxWarnBytes ?? DEFAULT_OUTBOX_WARN_BYTES,
      outboxWarnPending: options.outboxWarnPending ?? null,
    };
    const sections = { stack, connector, slots, consumerGroups, dlq, parked, outboxTable, topicPartitions, watchdog };
    if (connector.ok) connector.url = maskUrl(connector.url);
    // The deployed connector's own slot.name wins over the configured one (as in connector:status).
    if (connector.ok && slots.ok && connector.slotName && connector.slotName !== slots.slotName) {
      const slotName = connector.slotName;
      slots.slotName = slotName;
      for (const row of slots.slots) row.configured = row.name === slotName;
      slots.slots.sort((a, b) => Number(b.configured) - Number(a.configured));
      slots.found = slots.slots.some((row) => row.configured);
    }
    return {
      generatedAt: new Date().toISOString(),
      verdict: computeVerdict({ ...sections, options: options_ }),
      targets: {
        database: `${db.user}@${db.host}:${db.port}/${db.database}`,
        kafka: [...config.kafka.brokers],
        connect: maskUrl(config.connect.url),
        watchdog: maskUrl(watchdogUrl),
      },
      options: options_,
      ...sections,
    };
  } finally {
    await Promise.all([admin.close(), partitionsAdmin.close()]);
  }
}
