import { resolve } from 'node:path';
import { Command, Option } from 'commander';
import { OutboxError } from '../errors';
import { createRouter, createRouterMetrics } from '../router';
import { UNKNOWN_EVENT_TYPE_POLICIES, type UnknownEventTypePolicy } from '../router/options';
import { runService } from '../service';
import { defaultOf, loadCommandConfig, loadCommandOutboxes, wholeNumber, withConfigOption, type FlagSetting } from './config-option';
import { loadHandlerModule } from './load-handlers';
import { requireSchemas } from './schema-commands';
import { action, loggerFor } from './run-command';

export function topicsPattern(source: string): RegExp {
  try {
    return new RegExp(source);
  } catch (error) {
    throw new OutboxError('TOPIC_PATTERN_INVALID', `--topics ${JSON.stringify(source)} is not a valid regular expression (${(error as Error).message}); e.g. --topics '^outbox\\.event\\.(order|payment)$'.`);
  }
}

/** `--unknown-event-type-for order=block` (repeatable): one aggregate type's policy for event types without a handler. */
function unknownEventTypeFor(value: string, previous: Record<string, UnknownEventTypePolicy> = {}): Record<string, UnknownEventTypePolicy> {
  const at = value.indexOf('=');
  const [type, policy] = [value.slice(0, at), value.slice(at + 1)];
  if (at < 1 || !(UNKNOWN_EVENT_TYPE_POLICIES as readonly string[]).includes(policy)) {
    throw new OutboxError('FLAG_INVALID', `--unknown-event-type-for ${JSON.stringify(value)} must be <aggregateType>=<${UNKNOWN_EVENT_TYPE_POLICIES.join('|')}>, e.g. --unknown-event-type-for order=block.`);
  }
  return { ...previous, [type]: policy as UnknownEventTypePolicy };
}

function retentionMs(value: string, flag: string): number {
  return value.trim() === '-1' ? -1 : wholeNumber(0)(value, flag);
}

/** The router's flags and the settings they set (router.*). */
export const ROUTER_FLAGS: readonly FlagSetting[] = [
  { flag: '--handlers', path: 'router.handlers' },
  { flag: '--consumer', path: 'router.consumer' },
  { flag: '--group-id', path: 'router.groupId' },
  { flag: '--allow-group-id-mismatch', path: 'router.allowGroupIdMismatch' },
  { flag: '--max-attempts', path: 'router.maxAttempts', parse: wholeNumber(1) },
  { flag: '--metrics-port', path: 'router.metricsPort', parse: wholeNumber(0, 'a TCP port from 0 (any free port) to 65535') },
  { flag: '--metrics-host', path: 'router.metricsHost' },
  { flag: '--topics', path: 'router.topics', parse: (source: string) => (topicsPattern(source), source) },
  { flag: '--partitions', path: 'router.partitionsConsumedConcurrently', parse: wholeNumber(1) },
  { flag: '--lanes', path: 'router.lanes', parse: wholeNumber(1) },
  { flag: '--max-transaction-records', path: 'router.maxTransactionRecords', parse: wholeNumber(1) },
  { flag: '--block', path: 'router.policies', parse: (types: string[]) => Object.fromEntries(types.map((t) => [t, 'block'])) },
  { flag: '--unknown-event-type', path: 'router.unknownEventType' },
  { flag: '--unknown-event-type-for', path: 'router.unknownEventTypes' },
  { flag: '--dlq-retention-ms', path: 'router.dlqRetentionMs', parse: retentionMs },
  { flag: '--dlq-replication-factor', path: 'router.dlqReplicationFactor', parse: wholeNumber(1) },
  { flag: '--handler-timeout-ms', path: 'router.handlerTimeoutMs', parse: wholeNumber(0) },
  { flag: '--schemas', path: 'router.schemasDir', parse: (dir: string) => resolve(dir) },
  { flag: '--inbox-retention-ms', path: 'router.inboxRetentionMs', parse: wholeNumber(0) },
  { flag: '--dlq-replay-horizon-ms', path: 'router.dlqReplayHorizonMs', parse: wholeNumber(0) },
  { flag: '--allow-short-inbox-retention', path: 'router.allowShortInboxRetention' },
];

function routerOptions(command: Command): Command {
  return command
    .option('--handlers <module>', 'a .js (CommonJS) or .mjs (ES module) file whose default export maps aggregate type → event type → async (event, ctx) (router.handlers; required)')
    .option('--consumer <name>', 'consumer name: the inbox key and the Kafka group id (router.consumer; required except on the local stack, where it defaults to outbox-router)')
    .option('--group-id <id>', 'Kafka consumer group, if not the consumer name (needs --allow-group-id-mismatch) (router.groupId)')
    .option('--allow-group-id-mismatch', `accept a --group-id other than --consumer (the inbox is keyed by consumer) ${defaultOf('router.allowGroupIdMismatch')}`)
    .option('--max-attempts <n>', `handler attempts before dead-lettering (or blocking) ${defaultOf('router.maxAttempts')}`)
    .option('--metrics-port <port>', `/metrics, /livez, /readyz and /healthz port, 0 for any free port ${defaultOf('router.metricsPort')}`)
    .option('--metrics-host <host>', `address for /metrics, /livez, /readyz and /healthz ${defaultOf('router.metricsHost')}`)
    .option('--topics <regex>', `routed topics to consume, a regular expression (new matching topics are picked up every router.topicRefreshMs) (router.topics; default: the routed topics of the handlers' aggregate types, named by connector.topicReplacement, e.g. outbox.event.order)`)
    .option('--partitions <n>', `partitions handled at once ${defaultOf('router.partitionsConsumedConcurrently')}`)
    .option('--lanes <n>', `parallel lanes per partition (by key hash; each key stays in order) ${defaultOf('router.lanes')}`)
    .option('--max-transaction-records <n>', `consecutive records applied in one inbox transaction ${defaultOf('router.maxTransactionRecords')}`)
    .option('--block <aggregateTypes...>', 'aggregate types whose failing records hold their partition (retried forever) instead of being dead-lettered (router.policies)')
    .addOption(new Option('--unknown-event-type <action>', `an event type with no handler: dead-letter, skip (counted), or block its partition ${defaultOf('router.unknownEventType')}`).choices([...UNKNOWN_EVENT_TYPE_POLICIES]))
    .addOption(new Option('--unknown-event-type-for <aggregateType=action>', 'the same for one aggregate type (repeatable) (router.unknownEventTypes)').argParser(unknownEventTypeFor))
    .option('--dlq-retention-ms <ms>', `retention.ms of the dead-letter topics the router creates, -1 for forever ${defaultOf('router.dlqRetentionMs')}`)
    .option('--dlq-replication-factor <n>', `replication factor of the dead-letter topics the router creates ${defaultOf('router.dlqReplicationFactor')}`)
    .option('--handler-timeout-ms <ms>', `a handler running longer fails its attempt, 0 for no limit ${defaultOf('router.handlerTimeoutMs')}`)
    .option('--schemas <dir>', 'reader schemas, <aggregate_type>/<EventType>.avsc: Avro payloads are decoded with them (the handlers module\'s `schemas` export takes precedence) (router.schemasDir; default: none, Avro is then read with the writer\'s schema unless the handlers module exports `schemas`)')
    .option('--inbox-retention-ms <ms>', `prune this consumer's inbox rows older than this, 0 for never; no pruning while below the safe minimum (docs/operations.md) ${defaultOf('router.inboxRetentionMs')}`)
    .option('--dlq-replay-horizon-ms <ms>', `how long after an event was applied its dead letter may still be replayed with dlq:replay --all ${defaultOf('router.dlqReplayHorizonMs')}`)
    .option('--allow-short-inbox-retention', `prune even below the safe minimum, or with routed topics compacted or unreadable ${defaultOf('router.allowShortInboxRetention')}`);
}

export function routerCommand(): Command {
  const command = new Command('router').description(
    'Consume the routed topics and apply each event exactly once: decode (Avro via the registry, or JSON), insert the inbox row and run the ' +
      'handler in one transaction, then commit the offset; retry failures with backoff, dead-letter what cannot be processed to outbox.dlq.<aggregate_type>. ' +
      'Serves /metrics, /livez, /readyz (200 once joined to its consumer group) and /healthz. Stops gracefully on SIGTERM/SIGINT.',
  );
  return routerOptions(withConfigOption(command)).action(
    action(async (_opts: unknown, command: Command) => {
      const log = loggerFor(command);
      // The router's own settings (its database holds the inbox) are the shared ones; with an outboxes
      // section it reads the topics of every outbox, or of those --outbox names.
      const loaded = loadCommandConfig(command, ROUTER_FLAGS, 'shared', { ignoreOutbox: true });
      const config = loaded.config;
      const topicReplacements = loaded.outboxes.length > 0 ? loadCommandOutboxes(command, ROUTER_FLAGS).map((o) => o.config.connector.topicReplacement) : undefined;
      const settings = config.router;
      if (!settings.handlers) {
        throw new OutboxError('HANDLERS_INVALID', 'The router needs its handlers module: pass --handlers <module> (or set router.handlers / OUTBOX_ROUTER_HANDLERS).');
      }
      const { handlers, schemas: readerSchemas } = await loadHandlerModule(settings.handlers);
      // A malformed reader schema, or a --schemas path with none, fails here rather than on every Avro record.
      if (settings.schemasDir !== undefined) requireSchemas(settings.schemasDir);
      const metrics = createRouterMetrics();
      const router = createRouter({ config, handlers, readerSchemas, topicReplacements, topics: settings.topics === undefined ? undefined : topicsPattern(settings.topics), logger: log, onEvent: metrics.onEvent });
      await runService({
        service: router,
        logger: log,
        metrics: { host: settings.metricsHost, port: settings.metricsPort, registry: metrics.registry },
        health: () => {
          const h = router.health();
          return { healthy: h.running && h.joined, details: { ...h, stats: router.stats(), ...router.readyDetails() } };
        },
        started: (url) => ({ fields: { handlers: Object.keys(handlers), metrics: url }, message: 'router started' }),
        stopping: 'router stopping: finishing in-flight work, committing offsets',
        stopped: () => ({ fields: { stats: router.stats() }, message: 'router stopped' }),
      });
    }),
  );
}
