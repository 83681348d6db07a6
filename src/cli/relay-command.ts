import { Command } from 'commander';
import { loadConfig } from '../config';
import type { RelayConfig } from '../config/relay-schema';
import { OutboxError } from '../errors';
import { createRelay, createRelayMetrics } from '../relay';
import { startHealthServer } from '../router';
import { withConfigOption } from './config-option';
import { action, loggerFor } from './run-command';

interface RelayFlags {
  config?: string;
  workers?: string;
  batchSize?: string;
  maxBatchBytes?: string;
  pollIntervalMs?: string;
  minPollIntervalMs?: string;
  retentionMs?: string;
  metricsPort?: string;
  metricsHost?: string;
  notify?: boolean;
}

const NUMERIC_FLAGS: Array<[Exclude<keyof RelayFlags, 'notify'>, keyof RelayConfig, string, string]> = [
  ['workers', 'workers', '--workers', 'a whole number of shards from 1, e.g. --workers 4'],
  ['batchSize', 'batchSize', '--batch-size', 'a whole number of rows from 1, e.g. --batch-size 500'],
  ['maxBatchBytes', 'maxBatchBytes', '--max-batch-bytes', 'a whole number of bytes from 1, e.g. --max-batch-bytes 16777216 (16 MiB)'],
  ['pollIntervalMs', 'pollIntervalMs', '--poll-interval-ms', 'milliseconds from 1, e.g. --poll-interval-ms 100'],
  ['minPollIntervalMs', 'minPollIntervalMs', '--min-poll-interval-ms', 'milliseconds from 0, e.g. --min-poll-interval-ms 5'],
  ['retentionMs', 'retentionMs', '--retention-ms', 'milliseconds from 0, e.g. --retention-ms 86400000 (one day)'],
  ['metricsPort', 'metricsPort', '--metrics-port', 'a TCP port from 0 (any free port) to 65535'],
];

/** Flags → relay settings; a value that is not a whole number is named with what to pass instead. Ranges are the schema's. */
export function relayFlagSettings(flags: RelayFlags): Partial<RelayConfig> {
  const out: Record<string, unknown> = {};
  for (const [flag, setting, name, expected] of NUMERIC_FLAGS) {
    const raw = flags[flag];
    if (raw === undefined) continue;
    if (!/^\s*\d+\s*$/.test(raw)) {
      throw new OutboxError('CONFIG_INVALID', `${name} ${JSON.stringify(raw)} is not a whole number; pass ${expected}.`, { details: { flag: name, value: raw } });
    }
    out[setting] = Number(raw);
  }
  if (flags.metricsHost !== undefined) out.metricsHost = flags.metricsHost;
  if (flags.notify !== undefined) out.notify = flags.notify;
  return out as Partial<RelayConfig>;
}

export function relayCommand(): Command {
  return withConfigOption(
    new Command('relay').description(
      'The polling publisher, an alternative to CDC where logical replication is not allowed: N workers, one per shard of hash(aggregate_id), ' +
        'claim unpublished outbox rows (FOR UPDATE SKIP LOCKED), publish them to outbox.event.<aggregate_type> with the same key, value and ' +
        'headers as the Debezium Event Router, then mark them published in the same transaction; published rows are deleted after retention. ' +
        'Serves /metrics and /healthz. Stops gracefully on SIGTERM/SIGINT. See docs/relay.md.',
    ),
  )
    .option('--workers <n>', 'shards and workers; the same on every instance (default: relay.workers, 4)')
    .option('--batch-size <n>', 'rows claimed per transaction (default: relay.batchSize, 500)')
    .option('--max-batch-bytes <n>', 'payload and header bytes claimed per transaction, at least one row (default: relay.maxBatchBytes, 16 MiB)')
    .option('--poll-interval-ms <ms>', 'wait between polls when idle (default: relay.pollIntervalMs, 100)')
    .option('--min-poll-interval-ms <ms>', 'wait after a claim that found rows; each empty claim doubles it up to the poll interval (default: relay.minPollIntervalMs, 5)')
    .option('--notify', 'wake on LISTEN/NOTIFY, polling only as the fallback; needs the trigger db:provision makes with relay.notify (default: relay.notify, off)')
    .option('--retention-ms <ms>', 'keep published rows this long before deleting them (default: relay.retentionMs, one day)')
    .option('--metrics-port <port>', '/metrics and /healthz port, 0 for any free port (default: relay.metricsPort, 9466)')
    .option('--metrics-host <host>', 'address for /metrics and /healthz (default: relay.metricsHost, 127.0.0.1)')
    .action(
      action(async (_opts: RelayFlags, command: Command) => {
        const log = loggerFor(command);
        const flags = command.optsWithGlobals<RelayFlags>();
        const config = loadConfig({ file: flags.config, overrides: { relay: relayFlagSettings(flags) } });
        const metrics = createRelayMetrics();
        const relay = createRelay({ config, logger: log, onEvent: metrics.onEvent });
        const http = await startHealthServer({
          host: relay.settings.metricsHost,
          port: relay.settings.metricsPort,
          registry: metrics.registry,
          health: () => {
            const h = relay.health();
            return { healthy: h.running, details: { ...h, stats: relay.stats() } };
          },
        });
        try {
          await relay.start();
        } catch (error) {
          await http.close();
          throw error;
        }
        log.info({ workers: relay.settings.workers, metrics: `http://${relay.settings.metricsHost}:${http.port}/metrics` }, 'relay started');
        await new Promise<void>((resolveStop) => {
          const stop = (signal: string) => {
            log.info({ signal }, 'relay stopping: finishing the batches in hand');
            void relay
              .stop()
              .then(() => http.close())
              .finally(() => {
                log.info({ stats: relay.stats() }, 'relay stopped');
                resolveStop();
              });
          };
          process.once('SIGTERM', () => stop('SIGTERM'));
          process.once('SIGINT', () => stop('SIGINT'));
        });
      }),
    );
}
