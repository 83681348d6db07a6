import { Command, Option } from 'commander';
import type { OutboxConfig } from '../config';
import {
  connectorStatus,
  DEFAULT_PEEK_TIMEOUT_MS,
  deleteConnector,
  deployConnector,
  formatDiff,
  pauseConnector,
  PUBLICATION_FIX,
  RENDER_FORMATS,
  renderConnector,
  restartConnector,
  resumeConnector,
  type ConnectorBuildOptions,
  type ConnectorStatusReport,
  type DesiredConnectorOptions,
  type RenderFormat,
  type StrimziOptions,
} from '../connector';
import { OutboxError } from '../errors';
import { configFrom, loadCommandOutboxes, wholeNumber, withConfigOption } from './config-option';
import { runEachOutbox } from './each-outbox';
import { action, formatMs, loggerFor } from './run-command';

interface CommonOptions {
  json?: boolean;
}

function withCommon(command: Command, json = true): Command {
  withConfigOption(command);
  if (json) command.option('--json', 'print JSON for scripts', false);
  return command;
}

function print(json: boolean | undefined, value: unknown, lines: () => string[]): void {
  process.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${lines().join('\n')}\n`);
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function parseSets(sets: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of sets) {
    const eq = item.indexOf('=');
    if (eq <= 0) throw new OutboxError('FLAG_INVALID', `--set expects key=value, got ${JSON.stringify(item)}. Example: --set slot.max.retries=10`);
    out[item.slice(0, eq).trim()] = item.slice(eq + 1);
  }
  return out;
}

function parseAddress(address: string | undefined): Pick<ConnectorBuildOptions, 'databaseHost' | 'databasePort'> {
  if (!address) return {};
  const match = /^(.+?)(?::(\d+))?$/.exec(address);
  return { databaseHost: match?.[1], databasePort: match?.[2] ? Number(match[2]) : undefined };
}

const int = (v: string) => Number.parseInt(v, 10);

/** The flags that shape the connector config: connector:deploy applies it, connector:render prints it. */
interface BuildFlags {
  force: boolean;
  set: string[];
  partitions?: number;
  replicationFactor?: number;
  dbAddress?: string;
}

function withBuildFlags(command: Command, force: string): Command {
  return command
    .option('--force', force, false)
    .option('--set <key=value>', 'an extra connector property (repeatable; checked by the guard rails)', collect, [])
    .addOption(new Option('--partitions <n>', 'partitions of the topics Connect creates (-1: broker default)').argParser(int))
    .addOption(new Option('--replication-factor <n>', 'replication factor of those topics (-1: broker default)').argParser(int))
    .option('--db-address <host[:port]>', 'the database as the Connect worker reaches it, if not config.database (compose: postgres:5432)');
}

/** The one mapping from those flags to the builder's options, shared by deploy and render. */
function desiredFrom(opts: BuildFlags): Required<DesiredConnectorOptions> {
  return {
    force: opts.force,
    build: {
      extra: parseSets(opts.set),
      topicPartitions: opts.partitions,
      topicReplicationFactor: opts.replicationFactor,
      ...parseAddress(opts.dbAddress),
    },
  };
}

function deployCommand(): Command {
  return withBuildFlags(
    withCommon(
      new Command('connector:deploy').description(
        'Deploy (or update) the Debezium PostgreSQL connector with the Outbox Event Router: validate through Kafka Connect, ' +
          'show the difference to the stored config, refuse unsafe slot/offset states, write only if changed, and wait until ' +
          'the connector and its task are RUNNING.',
      ),
    )
      .option('--dry-run', 'validate and show the difference, write nothing', false)
      .option(
        '--resnapshot',
        'recover from a lost slot (wal_status lost): delete the connector, its stored offsets and the slot, then deploy with a snapshot of the outbox table (its rows are published again; consumers drop duplicates by id). Refused on a healthy slot unless --force',
        false,
      ),
    'deploy despite guard-rail refusals (unknown slot position, missing slot, unpublished rows older than the slot, compacted topics, unsafe --set values)',
  ).action(
    action(async (opts: CommonOptions & BuildFlags & { dryRun: boolean; resnapshot: boolean }, command: Command) =>
      // One connector after another (Connect rebalances on each write); one refused or failing leaves the others deployed.
      runEachOutbox(loadCommandOutboxes(command, []), loggerFor(command), (outbox, log) => deployConnector(outbox.config, { dryRun: opts.dryRun, resnapshot: opts.resnapshot, log, ...desiredFrom(opts) }), {
        json: Boolean(opts.json),
        concurrent: false,
        lines: (result) => [
        // A new connector's diff is its whole config: printed on a dry run only.
        ...(result.action === 'created' ? [`${result.diff.added.length} properties (--json prints them)`] : formatDiff(result.diff)),
        ...result.overridden.map((o) => `forced past: ${o}`),
        ...(result.warnings ?? []).map((w) => `warning: ${w}`),
        result.action === 'unchanged'
          ? `connector ${result.connector} unchanged: nothing written`
          : result.action === 'dry-run'
            ? `dry run: connector ${result.connector} would be ${result.diff.added.length === Object.keys(result.config).length ? 'created' : 'updated'}; nothing written`
            : `connector ${result.connector} ${result.action}${result.runningAfterMs === undefined ? '' : `, RUNNING after ${formatMs(result.runningAfterMs)}`}`,
        ],
      }),
    ),
  );
}

interface RenderFlags extends BuildFlags {
  format: RenderFormat;
  strimziCluster?: string;
  namespace?: string;
  secretName?: string;
  secretKey?: string;
}

function renderCommand(): Command {
  return withBuildFlags(
    withCommon(
      new Command('connector:render')
        .description(
          'Print the connector config connector:deploy would apply, without contacting Connect or the database. ' +
            '--format json (default): {"name", "config"}, the body of POST /connectors; PUT /connectors/<name>/config takes ' +
            'its "config" object alone (jq .config). --format strimzi: a KafkaConnector resource (YAML) whose password is a ' +
            '${secrets:<namespace>/<secret>:<key>} reference for Strimzi\'s KubernetesSecretConfigProvider. The password is ' +
            'never printed, only the config-provider reference the worker resolves (docs/connector.md).',
        )
        .addOption(new Option('--format <format>', 'json or strimzi').choices([...RENDER_FORMATS]).default('json'))
        .option('--strimzi-cluster <name>', 'strimzi: the KafkaConnect resource (strimzi.io/cluster label; default my-connect-cluster)')
        .option('--namespace <namespace>', 'strimzi: namespace of the KafkaConnector and the Secret (default default)')
        .option('--secret-name <name>', 'strimzi: the Secret holding the CDC role\'s password (default outbox-credentials)')
        .option('--secret-key <key>', 'strimzi: its key (default cdc-password)'),
      false,
    ),
    'render what connector:deploy --force would apply: --set values the guard rails refuse are kept',
  ).action(
    action(async (opts: RenderFlags, command: Command) => {
      const given: StrimziOptions = {
        ...(opts.strimziCluster === undefined ? {} : { cluster: opts.strimziCluster }),
        ...(opts.namespace === undefined ? {} : { namespace: opts.namespace }),
        ...(opts.secretName === undefined ? {} : { secretName: opts.secretName }),
        ...(opts.secretKey === undefined ? {} : { secretKey: opts.secretKey }),
      };
      const strimzi = Object.keys(given).length > 0 ? given : undefined;
      process.stdout.write(renderConnector(configFrom(command, 'outbox'), { format: opts.format, strimzi, ...desiredFrom(opts) }));
    }),
  );
}

function statusLines(report: ConnectorStatusReport): string[] {
  if (!report.exists) return [`connector ${report.connector}: not deployed at ${report.url}`];
  const slot = report.slot
    ? `slot ${report.slotName}: ${report.slot.active ? 'active' : 'INACTIVE'}, confirmed_flush_lsn ${report.slot.confirmedFlushLsn}, retained WAL ${report.slot.retainedWalBytes ?? '?'} bytes, unconfirmed ${report.slot.confirmedLagBytes ?? '?'} bytes`
    : report.slot === null
      ? `slot ${report.slotName}: missing`
      : `slot ${report.slotName}: unknown (${report.slotError})`;
  const pub = report.publication;
  const publication = !pub
    ? []
    : pub.ok
      ? [`publication ${pub.publication}: publishes inserts of ${pub.schema}.${pub.table}`]
      : [`publication ${pub.publication}: DRIFT, outbox inserts are not decoded: ${pub.problems.join('; ')}. ${PUBLICATION_FIX}`];
  return [
    `connector ${report.connector}: ${report.state ?? 'no status yet'} on ${report.worker ?? '-'}`,
    ...(report.trace ? [report.trace] : []),
    ...report.tasks.flatMap((t) => [`  task ${t.id}: ${t.state} on ${t.worker}`, ...(t.trace ? [t.trace] : [])]),
    slot,
    ...publication,
    report.healthy ? 'healthy' : 'NOT healthy',
  ];
}

function statusCommand(): Command {
  return withCommon(
    new Command('connector:status').description(
      'Show the connector, its worker and tasks (with the head of any failure trace), its replication slot (active, ' +
        'confirmed_flush_lsn, retained WAL) and whether the publication still publishes inserts of the outbox table. ' +
        'Exits 1 unless the connector and every task are RUNNING, the slot is active and the publication has not drifted.',
    ),
  ).action(
    action(async (opts: CommonOptions, command: Command) => {
      const report = await connectorStatus(configFrom(command, 'outbox'));
      print(opts.json, report, () => statusLines(report));
      return report.healthy ? 0 : 1;
    }),
  );
}

function simpleCommand(name: string, description: string, run: (config: OutboxConfig) => Promise<void>, done: string): Command {
  return withCommon(new Command(name).description(description), false).action(
    action(async (_opts: CommonOptions, command: Command) => {
      const config = configFrom(command, 'outbox');
      await run(config);
      process.stdout.write(`connector ${config.connector.name}: ${done}\n`);
    }),
  );
}

/**
 * --peek-timeout-ms of connector:delete --drop-slot and outbox:switch-to-relay: peeking a slot decodes
 * its whole backlog, which takes longer than database.statementTimeoutMs on large ones (docs/relay.md).
 */
export function peekTimeoutOption(prefix = ''): Option {
  return new Option('--peek-timeout-ms <ms>', `${prefix}the statement timeout of the slot peek, which decodes the slot's whole backlog; 0 = no limit`)
    .argParser((value) => wholeNumber(0, 'milliseconds from 0 (no limit), e.g. --peek-timeout-ms 7200000')(value, '--peek-timeout-ms'))
    .default(DEFAULT_PEEK_TIMEOUT_MS);
}

function deleteCommand(): Command {
  return withCommon(
    new Command('connector:delete').description(
      'Delete the connector and wait until Connect no longer lists it. The replication slot and the publication stay ' +
        '(a redeploy resumes where it stopped) unless --drop-slot is given, which refuses (without --force) while outbox rows ' +
        'the connector has not published would be discarded with the slot.',
    ),
  )
    .option('--drop-slot', "also reset the connector's offsets, then drop its replication slot and the publication (run db:provision before deploying again)", false)
    .option('--force', 'with --drop-slot: drop even when outbox rows the connector has not published would be discarded', false)
    .addOption(peekTimeoutOption('with --drop-slot: '))
    .action(
      action(async (opts: CommonOptions & { dropSlot: boolean; force: boolean; peekTimeoutMs: number }, command: Command) => {
        const result = await deleteConnector(configFrom(command, 'outbox'), { dropSlot: opts.dropSlot, force: opts.force, peekTimeoutMs: opts.peekTimeoutMs, log: loggerFor(command) });
        const u = result.unconfirmed;
        print(opts.json, result, () => [
          `connector ${result.connector}: ${result.deleted ? 'deleted' : 'was not deployed'}`,
          ...(opts.dropSlot
            ? [`slot ${result.slotName}: ${result.slotDropped ? 'dropped' : 'was absent'}; publication: ${result.publicationDropped ? 'dropped' : 'was absent'}`]
            : []),
          ...(u
            ? [`discarded with the slot: ${u.unconfirmedBytes ?? '?'} bytes of unconfirmed WAL, ${u.outboxRows ?? `an uncounted number of (${u.countError})`} unpublished outbox row(s)`]
            : []),
        ]);
      }),
    );
}

/** The connector:* commands, for main.ts to add to the program. */
export function connectorCommands(): Command[] {
  return [
    deployCommand(),
    renderCommand(),
    statusCommand(),
    simpleCommand(
      'connector:restart',
      'Restart the failed parts of the connector (POST …/restart?includeTasks=true&onlyFailed=true); running tasks are left alone.',
      (c) => restartConnector(c),
      'restart requested for failed instances',
    ),
    simpleCommand(
      'connector:pause',
      'Pause the connector: it stops streaming and keeps its slot, which then retains WAL until it is resumed.',
      (c) => pauseConnector(c),
      'pause requested',
    ),
    simpleCommand('connector:resume', 'Resume a paused or stopped connector.', (c) => resumeConnector(c), 'resume requested'),
    deleteCommand(),
  ];
}
