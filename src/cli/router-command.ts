import { resolve } from 'node:path';
import { Command, Option } from 'commander';
import { createCodec, topicForReplacement } from '../codec';
import { OutboxError } from '../errors';
import { createRouter, createRouterMetrics, DEFAULT_TOPICS, startHealthServer, type Handlers } from '../router';
import { HANDLERS_SHAPE, handlerProblems, UNKNOWN_EVENT_TYPE_POLICIES, type UnknownEventTypePolicy } from '../router/options';
import { STACK_HOST, STACK_PORTS } from '../config/local-stack';
import { configFrom, withConfigOption } from './config-option';
import { action, loggerFor } from './run-command';

/** Loads a handlers module: its default export (or the module itself) maps aggregate type → event type → handler. */
function loadHandlers(path: string): Handlers {
  const file = resolve(path);
  let loaded: unknown;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    loaded = require(file);
  } catch (error) {
    throw new OutboxError('CONFIG_INVALID', `Cannot load the handlers module ${file}: ${(error as Error).message}. Pass a compiled .js file (--handlers dist/handlers.js).`, { cause: error });
  }
  const handlers = (loaded as { default?: unknown })?.default ?? loaded;
  const problems = handlerProblems(handlers);
  if (problems.length > 0) {
    throw new OutboxError('CONFIG_INVALID', `The handlers module ${file} must export (default) ${HANDLERS_SHAPE}; found: ${problems.join(', ')}.`);
  }
  return handlers as Handlers;
}

interface RouterCommandOptions {
  handlers: string;
  consumer?: string;
  groupId?: string;
  allowGroupIdMismatch: boolean;
  maxAttempts: number;
  metricsPort: number;
  metricsHost: string;
  partitions: number;
  lanes: number;
  maxTransactionRecords: number;
  block?: string[];
  unknownEventType: UnknownEventTypePolicy;
  unknownEventTypeFor: Record<string, UnknownEventTypePolicy>;
  dlqRetentionMs: number;
  dlqReplicationFactor: number;
  handlerTimeoutMs: number;
  topics: string;
}

function topicsPattern(source: string): RegExp {
  try {
    return new RegExp(source);
  } catch (error) {
    throw new OutboxError('CONFIG_INVALID', `--topics ${JSON.stringify(source)} is not a valid regular expression (${(error as Error).message}); e.g. --topics '^outbox\\.event\\.(order|payment)$'.`);
  }
}

/** `--unknown-event-type-for order=block` (repeatable): one aggregate type's policy for event types without a handler. */
function unknownEventTypeFor(value: string, previous: Record<string, UnknownEventTypePolicy>): Record<string, UnknownEventTypePolicy> {
  const at = value.indexOf('=');
  const [type, policy] = [value.slice(0, at), value.slice(at + 1)];
  if (at < 1 || !(UNKNOWN_EVENT_TYPE_POLICIES as readonly string[]).includes(policy)) {
    throw new OutboxError('CONFIG_INVALID', `--unknown-event-type-for ${JSON.stringify(value)} must be <aggregateType>=<${UNKNOWN_EVENT_TYPE_POLICIES.join('|')}>, e.g. --unknown-event-type-for order=block.`);
  }
  return { ...previous, [type]: policy as UnknownEventTypePolicy };
}

function retentionMs(value: string): number {
  if (value === '-1') return -1;
  return nonNegativeInt('--dlq-retention-ms', value);
}

function nonNegativeInt(flag: string, value: string): number {
  if (!/^\d+$/.test(value)) throw new OutboxError('CONFIG_INVALID', `${flag} must be a whole number ≥ 0, got ${JSON.stringify(value)}.`);
  return Number(value);
}

function positiveInt(flag: string): (value: string) => number {
  return (value) => {
    const n = nonNegativeInt(flag, value);
    if (n < 1) throw new OutboxError('CONFIG_INVALID', `${flag} must be at least 1, got ${value}.`);
    return n;
  };
}

export function routerCommand(): Command {
  return withConfigOption(
    new Command('router').description(
      'Consume the routed topics and apply each event exactly once: decode (Avro via the registry, or JSON), insert the inbox row and run the ' +
        'handler in one transaction, then commit the offset; retry failures with backoff, dead-letter what cannot be processed to outbox.dlq.<aggregate_type>. ' +
        'Stops gracefully on SIGTERM/SIGINT.',
    ),
  )
    .requiredOption('--handlers <module>', 'a .js module whose default export maps aggregate type → event type → async (event, ctx)')
    .option('--consumer <name>', 'consumer name: the inbox key and the Kafka group id (required except on the local stack, where it defaults to outbox-router)')
    .option('--group-id <id>', 'Kafka consumer group, if not the consumer name (needs --allow-group-id-mismatch)')
    .option('--allow-group-id-mismatch', 'accept a --group-id other than --consumer (the inbox is keyed by consumer)', false)
    .addOption(new Option('--max-attempts <n>', 'handler attempts before dead-lettering (or blocking)').default(5).argParser(positiveInt('--max-attempts')))
    .addOption(new Option('--metrics-port <port>', '/metrics and /healthz port (0: any free port)').default(STACK_PORTS.routerMetrics).argParser((v) => Number.parseInt(v, 10)))
    .option('--metrics-host <host>', 'address for /metrics and /healthz', STACK_HOST)
    .option('--topics <regex>', 'routed topics to consume, a regular expression (new matching topics are picked up while running)', DEFAULT_TOPICS.source)
    .addOption(new Option('--partitions <n>', 'partitions handled at once').default(4).argParser(positiveInt('--partitions')))
    .addOption(new Option('--lanes <n>', 'parallel lanes per partition (by key hash; each key stays in order)').default(1).argParser(positiveInt('--lanes')))
    .addOption(new Option('--max-transaction-records <n>', 'consecutive records applied in one inbox transaction').default(500).argParser(positiveInt('--max-transaction-records')))
    .option('--block <aggregateTypes...>', "aggregate types whose failing records hold their partition (retried forever) instead of being dead-lettered")
    .addOption(new Option('--unknown-event-type <action>', 'an event type with no handler: dead-letter, skip (counted), or block its partition').choices([...UNKNOWN_EVENT_TYPE_POLICIES]).default('dead-letter'))
    .addOption(new Option('--unknown-event-type-for <aggregateType=action>', 'the same for one aggregate type (repeatable)').argParser(unknownEventTypeFor).default({}, 'none'))
    .addOption(new Option('--dlq-retention-ms <ms>', 'retention.ms of the dead-letter topics the router creates (-1: forever)').default(-1).argParser(retentionMs))
    .addOption(new Option('--dlq-replication-factor <n>', 'replication factor of the dead-letter topics the router creates').default(1).argParser(positiveInt('--dlq-replication-factor')))
    .addOption(new Option('--handler-timeout-ms <ms>', 'a handler running longer fails its attempt (0: no limit)').default(30_000).argParser((v) => nonNegativeInt('--handler-timeout-ms', v)))
    .action(
      action(async (opts: RouterCommandOptions, command: Command) => {
        const log = loggerFor(command);
        const config = configFrom(command);
        const handlers = loadHandlers(opts.handlers);
        const codec = createCodec({ registry: config.registry, topicFor: topicForReplacement(config.connector.topicReplacement) });
        const metrics = createRouterMetrics();
        const router = createRouter({
          config,
          handlers,
          codec,
          consumer: opts.consumer,
          groupId: opts.groupId,
          allowGroupIdMismatch: opts.allowGroupIdMismatch,
          topics: topicsPattern(opts.topics),
          maxAttempts: opts.maxAttempts,
          partitionsConsumedConcurrently: opts.partitions,
          lanes: opts.lanes,
          maxTransactionRecords: opts.maxTransactionRecords,
          policies: Object.fromEntries((opts.block ?? []).map((t) => [t, 'block' as const])),
          unknownEventType: opts.unknownEventType,
          unknownEventTypes: opts.unknownEventTypeFor,
          dlqRetentionMs: opts.dlqRetentionMs,
          dlqReplicationFactor: opts.dlqReplicationFactor,
          handlerTimeoutMs: opts.handlerTimeoutMs,
          logger: log,
          onEvent: metrics.onEvent,
        });
        const http = await startHealthServer({
          host: opts.metricsHost,
          port: opts.metricsPort,
          registry: metrics.registry,
          health: () => {
            const h = router.health();
            return { healthy: h.running && h.joined, details: { ...h, stats: router.stats() } };
          },
        });
        try {
          await router.start();
        } catch (error) {
          // An open listener would keep the process alive after the error is printed: close it first.
          await http.close();
          throw error;
        }
        log.info({ handlers: Object.keys(handlers), metrics: `http://${opts.metricsHost}:${http.port}/metrics` }, 'router started');
        await new Promise<void>((resolveStop) => {
          const stop = (signal: string) => {
            log.info({ signal }, 'router stopping: finishing in-flight work, committing offsets');
            void router
              .stop()
              .then(() => http.close())
              .finally(() => {
                log.info({ stats: router.stats() }, 'router stopped');
                resolveStop();
              });
          };
          process.once('SIGTERM', () => stop('SIGTERM'));
          process.once('SIGINT', () => stop('SIGINT'));
        });
      }),
    );
}
