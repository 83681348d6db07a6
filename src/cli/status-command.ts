import { Command } from 'commander';
import { OutboxError } from '../errors';
import { redactUrl } from '../log/redact';
import {
  collectStatus,
  DEFAULT_GROUP,
  DEFAULT_LAG_WARN,
  DEFAULT_OUTBOX_WARN_AGE_MS,
  DEFAULT_OUTBOX_WARN_BYTES,
  DEFAULT_PARKED_LIMIT,
  DEFAULT_STATUS_TIMEOUT_MS,
  DEFAULT_WATCHDOG_URL,
  renderStatus,
} from '../status';
import { loadCommandOutboxes, withConfigOption } from './config-option';
import { runEachOutbox } from './each-outbox';
import { action, loggerFor } from './run-command';

interface StatusFlags {
  json: boolean;
  group: string[];
  lagWarn?: string;
  timeout?: string;
  watchdogUrl?: string;
  topics?: string;
  dlqTopics?: string;
  parkedLimit?: string;
  parkedWarnKeys?: string;
  parkedWarnAgeMs?: string;
  outboxWarnAgeMs?: string;
  outboxWarnBytes?: string;
  outboxWarnPending?: string;
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function wholeNumber(flag: string, value: string | undefined, min: number, example: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value.trim()) || Number(value) < min || !Number.isSafeInteger(Number(value))) {
    throw new OutboxError('FLAG_INVALID', `${flag} expects a whole number ≥ ${min}, got ${JSON.stringify(value)}. Example: ${flag} ${example}`, {
      details: { flag, value },
    });
  }
  return Number(value);
}

function regex(flag: string, value: string | undefined): RegExp | undefined {
  if (value === undefined) return undefined;
  try {
    return new RegExp(value);
  } catch (error) {
    throw new OutboxError('TOPIC_PATTERN_INVALID', `${flag} expects a regular expression, got ${JSON.stringify(value)} (${(error as Error).message}). Example: ${flag} '^outbox\\.event\\..+'`, {
      details: { flag, value },
    });
  }
}

function httpUrl(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || !['http:', 'https:'].includes(url.protocol)) {
    throw new OutboxError('FLAG_INVALID', `${flag} expects an http(s) URL, got ${JSON.stringify(redactUrl(value))}. Example: ${flag} ${DEFAULT_WATCHDOG_URL}`, {
      details: { flag },
    });
  }
  return value;
}

/** `outbox status`: one screen for operators (src/status); exit code 0 OK, 1 WARNING, 2 CRITICAL. */
export function statusCommand(): Command {
  return withConfigOption(
    new Command('status').description(
      'One screen for operators: local stack services, connector and task states, replication slots (active, wal_status, ' +
        'retained WAL), consumer-group lag per topic, DLQ depth and retention, parked keys, the outbox table\'s size and oldest waiting row, and the watchdog\'s alerts. Each part has its own time limit, ' +
        'so an unreachable service is reported, not fatal. Exit code 0 OK, 1 WARNING, 2 CRITICAL (docs/status.md).',
    ),
  )
    .option('--json', 'print JSON for scripts (every section has ok, and error when not ok)', false)
    .option('--group <id>', `a consumer group to show even if it consumes no routed topic (repeatable; default: router.groupId, else router.consumer, else ${DEFAULT_GROUP})`, collect, [])
    .option('--lag-warn <records>', `warn when a group lags more records than this on a topic (default ${DEFAULT_LAG_WARN})`)
    .option('--timeout <ms>', `time limit of each section (default ${DEFAULT_STATUS_TIMEOUT_MS})`)
    .option('--watchdog-url <url>', `the watchdog's HTTP server; its /healthz is shown (default: watchdog.metricsHost and watchdog.metricsPort, ${DEFAULT_WATCHDOG_URL})`)
    .option('--topics <regex>', 'routed topics whose consumer groups are listed (default from connector.topicReplacement: ^outbox\\.event\\..+$)')
    .option('--dlq-topics <regex>', 'dead-letter topics whose depth and retention are shown (default ^outbox\\.dlq\\..+$)')
    .option('--parked-limit <keys>', `parked keys listed at most, the most events first; totals count all (default ${DEFAULT_PARKED_LIMIT})`)
    .option('--parked-warn-keys <keys>', 'warn when more keys than this are parked (default 0: any parked key warns)')
    .option('--parked-warn-age-ms <ms>', 'warn also when the oldest parked key was parked longer ago than this, whatever --parked-warn-keys says (default: no age rule)')
    .option('--outbox-warn-age-ms <ms>', `warn when the outbox's oldest row with published_at IS NULL is older than this (default ${DEFAULT_OUTBOX_WARN_AGE_MS}, 15 minutes)`)
    .option('--outbox-warn-bytes <bytes>', `warn when the outbox table with its indexes is larger than this (default ${DEFAULT_OUTBOX_WARN_BYTES}, 1 GiB)`)
    .option('--outbox-warn-pending <rows>', 'warn when more outbox rows than this have published_at IS NULL (default: no such rule)')
    .action(
      action(async (opts: StatusFlags, command: Command) => {
        const options = {
          lagWarn: wholeNumber('--lag-warn', opts.lagWarn, 0, '1000'),
          timeoutMs: wholeNumber('--timeout', opts.timeout, 100, '5000'),
          watchdogUrl: httpUrl('--watchdog-url', opts.watchdogUrl),
          topics: regex('--topics', opts.topics),
          dlqTopics: regex('--dlq-topics', opts.dlqTopics),
          parkedLimit: wholeNumber('--parked-limit', opts.parkedLimit, 1, '20'),
          parkedWarnKeys: wholeNumber('--parked-warn-keys', opts.parkedWarnKeys, 0, '10'),
          parkedWarnAgeMs: wholeNumber('--parked-warn-age-ms', opts.parkedWarnAgeMs, 0, '3600000'),
          outboxWarnAgeMs: wholeNumber('--outbox-warn-age-ms', opts.outboxWarnAgeMs, 0, '900000'),
          outboxWarnBytes: wholeNumber('--outbox-warn-bytes', opts.outboxWarnBytes, 0, '1073741824'),
          outboxWarnPending: wholeNumber('--outbox-warn-pending', opts.outboxWarnPending, 0, '10000'),
          groups: opts.group,
        };
        const emptyGroup = opts.group.find((g) => !g.trim());
        if (emptyGroup !== undefined) throw new OutboxError('FLAG_INVALID', '--group expects a consumer group id, got an empty string. Example: --group outbox-router');
        // Every outbox side by side, each section with its own time limit: one unreachable outbox is reported, not waited for.
        return runEachOutbox(loadCommandOutboxes(command, []), loggerFor(command), (outbox, logger) => collectStatus(outbox.config, { ...options, logger }), {
          json: opts.json,
          concurrent: true,
          lines: (status) => [renderStatus(status).trimEnd()],
          exitCode: (status) => status.verdict.exitCode,
          failedCode: 2,
        });
      }),
    );
}
