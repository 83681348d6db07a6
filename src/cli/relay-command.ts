import { Command } from 'commander';
import type { RelayConfig } from '../config/relay-schema';
import type { NamedOutbox, OutboxConfig } from '../config';
import type { Logger } from '../log';
import { createRelay, createRelayMetrics, relayHealthBody } from '../relay';
import { runService } from '../service';
import { runOutboxSet } from './outbox-set';
import { defaultOf, flagOverrides, loadCommandOutboxes, wholeNumber, withConfigOption, type FlagSetting } from './config-option';
import { action, loggerFor } from './run-command';

/** The relay's flags and the settings they set (relay.*). Ranges are the schema's. */
export const RELAY_FLAGS: readonly FlagSetting[] = [
  { flag: '--workers', path: 'relay.workers', parse: wholeNumber(0, 'a whole number of shards from 1, e.g. --workers 4') },
  { flag: '--batch-size', path: 'relay.batchSize', parse: wholeNumber(0, 'a whole number of rows from 1, e.g. --batch-size 500') },
  { flag: '--max-batch-bytes', path: 'relay.maxBatchBytes', parse: wholeNumber(0, 'a whole number of bytes from 1, e.g. --max-batch-bytes 16777216 (16 MiB)') },
  { flag: '--poll-interval-ms', path: 'relay.pollIntervalMs', parse: wholeNumber(0, 'milliseconds from 1, e.g. --poll-interval-ms 100') },
  { flag: '--min-poll-interval-ms', path: 'relay.minPollIntervalMs', parse: wholeNumber(0, 'milliseconds from 0, e.g. --min-poll-interval-ms 5') },
  { flag: '--retention-ms', path: 'relay.retentionMs', parse: wholeNumber(0, 'milliseconds from 0, e.g. --retention-ms 86400000 (one day)') },
  { flag: '--metrics-port', path: 'relay.metricsPort', parse: wholeNumber(0, 'a TCP port from 0 (any free port) to 65535') },
  { flag: '--metrics-host', path: 'relay.metricsHost' },
  { flag: '--notify', path: 'relay.notify' },
];

/** Flags → relay settings; a value that is not a whole number is named with what to pass instead. */
export function relayFlagSettings(flags: Record<string, unknown>): Partial<RelayConfig> {
  return (flagOverrides(RELAY_FLAGS, flags).overrides.relay ?? {}) as Partial<RelayConfig>;
}

export function relayCommand(): Command {
  return withConfigOption(
    new Command('relay').description(
      'The polling publisher, an alternative to CDC where logical replication is not allowed: N workers, one per shard of hash(aggregate_id), ' +
        'claim unpublished outbox rows (FOR UPDATE SKIP LOCKED), publish them to outbox.event.<aggregate_type> with the same key, value and ' +
        'headers as the Debezium Event Router, then mark them published in the same transaction; published rows are deleted after retention. ' +
        'Serves /metrics, /livez, /readyz and /healthz. Stops gracefully on SIGTERM/SIGINT. See docs/relay.md.',
    ),
  )
    .option('--workers <n>', `shards and workers; the same on every instance ${defaultOf('relay.workers')}`)
    .option('--batch-size <n>', `rows claimed per transaction ${defaultOf('relay.batchSize')}`)
    .option('--max-batch-bytes <n>', `payload and header bytes claimed per transaction, at least one row ${defaultOf('relay.maxBatchBytes', '16 MiB')}`)
    .option('--poll-interval-ms <ms>', `wait between polls when idle ${defaultOf('relay.pollIntervalMs')}`)
    .option('--min-poll-interval-ms <ms>', `wait after a claim that found rows; each empty claim doubles it up to the poll interval ${defaultOf('relay.minPollIntervalMs')}`)
    .option('--notify', `wake on LISTEN/NOTIFY, polling only as the fallback; needs the trigger db:provision makes with relay.notify ${defaultOf('relay.notify', 'off')}`)
    .option('--retention-ms <ms>', `keep published rows this long before deleting them ${defaultOf('relay.retentionMs', 'one day')}`)
    .option('--metrics-port <port>', `/metrics, /livez, /readyz and /healthz port, 0 for any free port ${defaultOf('relay.metricsPort')}`)
    .option('--metrics-host <host>', `address for /metrics, /livez, /readyz and /healthz ${defaultOf('relay.metricsHost')}`)
    .action(
      action(async (_opts: unknown, command: Command) => {
        const log = loggerFor(command);
        const outboxes = loadCommandOutboxes(command, RELAY_FLAGS);
        if (outboxes.length === 1 && outboxes[0]?.name === '') return runOne((outboxes[0] as NamedOutbox).config, log);
        return runSet(outboxes, log);
      }),
    );
}

async function runOne(config: OutboxConfig, log: Logger): Promise<void> {
  const metrics = createRelayMetrics();
  const relay = createRelay({ config, logger: log, onEvent: metrics.onEvent });
  await runService({
    service: relay,
    logger: log,
    metrics: { host: relay.settings.metricsHost, port: relay.settings.metricsPort, registry: metrics.registry },
    health: () => relayHealthBody(relay),
    started: (url) => ({ fields: { workers: relay.settings.workers, metrics: url }, message: 'relay started' }),
    stopping: 'relay stopping: finishing the batches in hand',
    stopped: () => ({ fields: { stats: relay.stats() }, message: 'relay stopped' }),
  });
}

/**
 * One relay per outbox in this process (docs/multi-outbox.md), each with its own pool, producer and
 * workers: one whose database or brokers fail stalls none of the others.
 */
function runSet(outboxes: readonly NamedOutbox[], log: Logger): Promise<void> {
  return runOutboxSet(outboxes, log, {
    what: 'relay',
    create: (config, memberLog) => {
      const metrics = createRelayMetrics();
      const relay = createRelay({ config, logger: memberLog, onEvent: metrics.onEvent });
      return { service: relay, registry: metrics.registry, health: () => relayHealthBody(relay), relay };
    },
    http: (config) => ({ host: config.relay.metricsHost, port: config.relay.metricsPort }),
    stopping: 'relay stopping: finishing the batches in hand',
    stoppedFields: (member) => ({ stats: member.relay.stats() }),
  });
}
