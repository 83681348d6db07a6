import type { OutboxConfig } from '../config';
import { OutboxError } from '../errors';
import type { Logger } from '../log';
import { desiredConnectorConfig, type DesiredConnectorOptions, type ConnectorConfig } from './build-config';
import { isSecretKey } from '../log/redact';
import { diffConfigs, formatDiff, redactConnectorConfig, type ConfigDiff } from './config-diff';
import { createConnectClient, type ConnectClient, type ConnectorStatusInfo } from './connect-client';
import { registerCleanupSlot, runOutboxCleanup } from '../cleanup';
import { describeChange, recordPartitions } from '../topics/partition-record';
import { countUnpublishedRows, forgetCleanupState, missingPrerequisites, prerequisiteError, readServerFacts, readSlot, withAdmin, type ServerFacts } from './database';
import { deleteConnector } from './operations';
import { quoteIdent } from './escape';
import { unsafeExtra } from './extra-guard';
import { topicFindings, type TopicAdmin } from './topic-guard';
import { failoverSlotWarning, offsetForServer, slotGuard, type GuardInput, type SlotInfo } from './slot-guard';
import { replicationRefusal } from '../topics/replication';
import { waitForRunning, waitForState, type WaitOptions } from './wait';
import { accept, checkUnchanged, guardBeforeWrite, oldServerWarning, refuse, type Deployment, type DeployStep } from './deploy-guard';

export type { DeployStep };

export interface DeployProgress {
  step: DeployStep;
  detail: string;
  ms: number;
}

export interface DeployOptions {
  /** Validate, diff and check guard rails, print what would change, write nothing. */
  dryRun?: boolean;
  /** Deploy despite guard-rail refusals (each is still reported in `overridden`). */
  force?: boolean;
  log?: Logger;
  onProgress?: (event: DeployProgress) => void;
  build?: DesiredConnectorOptions['build'];
  client?: ConnectClient;
  /** Reads existing topics' cleanup.policy; default: a kafkajs admin on config.kafka. */
  topicAdmin?: TopicAdmin;
  wait?: Pick<WaitOptions, 'pollMs' | 'settleMs'>;
  /**
   * The recovery from a lost slot (wal_status lost): stop and delete the connector with its stored
   * offsets, drop the slot, then deploy with snapshot.mode=initial, so every row still in the outbox
   * table is published again (the unread ones included; consumers drop the rest by id). Refused while
   * the slot is healthy, unless `force`.
   */
  resnapshot?: boolean;
}

export interface DeployResult {
  connector: string;
  action: 'created' | 'updated' | 'unchanged' | 'dry-run';
  diff: ConfigDiff;
  /** The deployed (or, on dry run, desired) config, secrets redacted. */
  config: Record<string, string>;
  /** Refusals that `force` overrode. */
  overridden: string[];
  /** Guard-rail findings on an unchanged deploy (nothing was written, so nothing was refused), and checks that could not run. */
  warnings?: string[];
  status?: ConnectorStatusInfo;
  /** From the write until the connector and every task had been RUNNING for the settle window (1.5 s by default). */
  runningAfterMs?: number;
  elapsedMs: number;
}




/**
 * Validate → check the database side → diff against Connect's stored config → guard rails → write
 * (or stop on dry run) → wait until the connector and every task are RUNNING. An unchanged config is
 * not written. A new connector is first created STOPPED, so that offsets a deleted namesake left in
 * Connect's offset topic are seen (and guarded) before anything streams.
 */
export async function deployConnector(config: OutboxConfig, options: DeployOptions = {}): Promise<DeployResult> {
  const started = Date.now();
  const { log, force = false } = options;
  const progress = (step: DeployStep, detail: string) => {
    log?.info({ step, ms: Date.now() - started }, `${step}: ${detail}`);
    options.onProgress?.({ step, detail, ms: Date.now() - started });
  };
  const client = options.client ?? createConnectClient(config.connect);
  const built = desiredConnectorConfig(config, { build: options.build, force });
  // --resnapshot is the consent to the snapshot the extra guard refuses otherwise.
  const desired: ConnectorConfig = options.resnapshot ? { ...built, 'snapshot.mode': 'initial' } : built;
  const name = desired.name as string;
  const slotName = desired['slot.name'] as string;
  const overridden = unsafeExtra(desired, options.build?.extra ?? {}).map((r) => `extra ${r.key}: ${r.reason}`);

  await validateConfig(client, desired, name, log);
  progress('validate', `Connect accepted the config (${Object.keys(desired).length} properties)`);
  if (options.resnapshot && !options.dryRun) await clearForResnapshot(config, client, { name, slotName, force, progress, log });

  const { slot, preSlotRows, server } = await readDatabaseSide(config, desired, slotName);
  progress('prerequisites', `publication ${config.outbox.publication} ready; slot ${slotName} ${slot ? `exists (confirmed ${slot.confirmedFlushLsn})` : 'not created yet'}`);

  const ownMinIsr = desired['topic.creation.default.min.insync.replicas'];
  const topics = await topicFindings(config, options.topicAdmin, {
    replicationFactor: Number(desired['topic.creation.default.replication.factor'] ?? -1),
    ...(ownMinIsr !== undefined ? { minInsyncReplicas: Number(ownMinIsr) } : {}),
  });
  const failoverWarning = failoverSlotWarning(slot, desired['slot.failover'] === 'true', name) ?? oldServerWarning(config, server);
  const topicWarnings = [topics.warning, topics.durability, failoverWarning].filter((w): w is string => w !== undefined);
  for (const w of topicWarnings) log?.warn({ step: 'guard' }, w);

  const current = await client.getConfig(name);
  const diff = diffConfigs(current, desired);
  const result = (action: DeployResult['action'], extra: Partial<DeployResult> = {}): DeployResult => ({
    connector: name,
    action,
    diff,
    config: redactConnectorConfig(desired),
    overridden,
    elapsedMs: Date.now() - started,
    ...extra,
    ...(topicWarnings.length ? { warnings: [...(extra.warnings ?? []), ...topicWarnings] } : {}),
  });
  const deployment: Deployment = {
    config,
    client,
    desired,
    name,
    force,
    log,
    progress,
    overridden,
    resetOffsets: false,
    server,
    guard: (input) => [...slotGuard({ slotName, database: config.database.database, slot, preSlotRows, timeline: server.timeline, ...input }), ...topics.findings],
    storedOffset: async () => offsetForServer(await client.offsets(name), desired['topic.prefix'] as string),
  };

  const replicationMessages = topics.replication.map((p) => p.message);
  if (diff.unchanged) {
    // Nothing is written, so the replication rule warns instead of refusing (the topics exist as they are).
    for (const m of replicationMessages) log?.warn({ step: 'guard' }, m);
    const unchanged = result('unchanged', await checkUnchanged(deployment, current as Record<string, string>));
    unchanged.warnings = [...(unchanged.warnings ?? []), ...replicationMessages];
    await registerCleanupFloor(config, slotName, log); // a deployment from before migration 012 gets registered too
    const changed = await recordRoutedPartitions(config, topics.partitions, log);
    if (changed.length) unchanged.warnings = [...(unchanged.warnings ?? []), ...changed];
    return unchanged;
  }
  progress('diff', current ? `${formatDiff(diff).length} change(s)` : 'new connector');
  for (const line of formatDiff(diff)) log?.info({ step: 'diff' }, line);
  if (topics.replication.length > 0) {
    if (!force) throw replicationRefusal(name, topics.replication);
    overridden.push(...replicationMessages);
  }

  await guardBeforeWrite(deployment, current, options.dryRun ?? false);
  if (options.dryRun) {
    progress('write', `dry run: nothing written${current ? '' : ' (offsets a deleted connector of this name left are only readable once it exists)'}`);
    return result('dry-run');
  }

  const writeStarted = Date.now();
  let expectTaskConfig: Record<string, string | null> | undefined;
  if (current) {
    const updated = await updateExisting(deployment, diff);
    if ('notRunning' in updated) return result('updated', { status: updated.notRunning });
    expectTaskConfig = updated.expectTaskConfig;
  } else {
    await createStoppedThenResume(deployment);
  }

  const status = await waitForRunning(client, name, {
    timeoutMs: config.connector.deployTimeoutMs,
    expectTaskConfig,
    onStaleStatus: (message) => log?.warn({ step: 'wait' }, message),
    ...options.wait,
  });
  const runningAfterMs = Date.now() - writeStarted;
  progress('wait', `connector and ${status.tasks.length} task(s) RUNNING after ${runningAfterMs} ms`);
  await registerCleanupFloor(config, slotName, log);
  const changed = await recordRoutedPartitions(config, topics.partitions, log);
  return result(current ? 'updated' : 'created', { status, runningAfterMs, ...(changed.length ? { warnings: changed } : {}) });
}

/**
 * Before a re-snapshot: nothing of the old stream may survive. The stored offsets would make Debezium
 * skip the snapshot and ask the new slot for a position it never had; the lost slot cannot stream.
 * The publication stays (db:provision owns it). The cleanup forgets the slot, so its floor starts again
 * at the new slot and no row the snapshot still has to read is deleted.
 */
async function clearForResnapshot(
  config: OutboxConfig,
  client: ConnectClient,
  o: { name: string; slotName: string; force: boolean; progress: (step: DeployStep, detail: string) => void; log: Logger | undefined },
): Promise<void> {
  const slot = await withAdmin(config, (db) => readSlot(db, o.slotName));
  if (slot && slot.walStatus !== 'lost' && !o.force) {
    throw new OutboxError(
      'CONNECTOR_UNSAFE',
      `Refusing to re-snapshot connector ${o.name}: its slot "${o.slotName}" is healthy (wal_status ${slot.walStatus ?? 'unknown'}), so nothing was lost, and a snapshot ` +
        'publishes every row still in the outbox table again. Deploy without --resnapshot; or add --force to re-snapshot anyway.',
      { details: { findings: ['slot-healthy'] } },
    );
  }
  // The connector with its stored offsets, then the slot; forced: what the lost slot held is gone already.
  const deleted = await deleteConnector(config, { client, log: o.log, dropSlot: true, force: true, keepPublication: true });
  o.progress('guard', `re-snapshot: connector ${o.name} and its stored offsets removed; slot ${o.slotName} ${deleted.slotDropped ? `dropped (wal_status was ${slot?.walStatus ?? 'unknown'})` : 'was absent'}`);
}

/**
 * The outbox cleanup accepts only a registered slot as proof (migration 012): register the connector's.
 * It deletes only rows above the floor it records when it first sees a slot (migration 011): rows
 * committed before the slot existed were never read. Recording it now, with the slot just created,
 * keeps that floor next to the slot's start, so the rows written between the deploy and the watchdog's
 * first run are cleaned too. One cleanup batch of one row does it; a database provisioned before
 * 011/012 has no cleanup, which is not the deploy's concern.
 */
async function registerCleanupFloor(config: OutboxConfig, slotName: string, log: Logger | undefined): Promise<void> {
  try {
    await withAdmin(config, async (db) => {
      await registerCleanupSlot(db, config.outbox, slotName, 'connector:deploy');
      await runOutboxCleanup(db, { outbox: config.outbox, slotName, batchSize: 1, maxBatches: 1 });
    });
  } catch (error) {
    log?.warn({ step: 'wait', err: { message: (error as Error).message } }, 'could not register the slot with the outbox cleanup: until it is registered the cleanup deletes nothing and the outbox grows. Run `outbox db:provision` (it creates the cleanup\'s tables), then `outbox connector:deploy` again, which registers it (docs/operations.md, "Outbox cleanup under CDC", has the INSERT to register it by hand)');
  }
}

/**
 * Records the routed topics' partition counts (migration 014), so `outbox status` can tell a count changed
 * later outside `outbox topics:grow`. A count that already changed since the last record is said now, as a
 * warning, and recorded: this deploy is its new reference. A database provisioned before 014 records nothing.
 */
async function recordRoutedPartitions(config: OutboxConfig, counts: Map<string, number> | undefined, log: Logger | undefined): Promise<string[]> {
  if (!counts) return [];
  try {
    const replaced = await withAdmin(config, (db) => recordPartitions(db, config.outbox, counts, 'connector:deploy'));
    if (replaced === null) {
      log?.warn({ step: 'wait' }, 'the routed topics\' partition counts were not recorded: the database has no table for them yet. Run `outbox db:provision` (migration 014), then deploy again; until then `outbox status` cannot tell partitions added by hand');
      return [];
    }
    const warnings = replaced.map((r) =>
      describeChange(
        { topic: r.topic, partitions: counts.get(r.topic) ?? 0, expected: r.partitions, source: r.recordedBy, since: r.recordedAt },
        'grow with `outbox topics:grow` from now on. This deploy records the new count',
      ),
    );
    for (const w of warnings) log?.warn({ step: 'guard' }, w);
    return warnings;
  } catch (error) {
    log?.warn({ step: 'wait', err: { message: (error as Error).message } }, 'could not record the routed topics\' partition counts');
    return [];
  }
}

/**
 * An offset reset means the slot and the stored offset disagreed (no slot, or a slot ahead of the offset:
 * replaced or advanced by someone else): the slot may not be the one the cleanup's floor was recorded
 * for, so forget its floor and marks (migration 012 explains why positions cannot tell).
 */
async function forgetSlotState(config: OutboxConfig, slotName: string): Promise<void> {
  await withAdmin(config, (db) => forgetCleanupState(db, config.outbox, slotName));
}

/** Connect's validation message for `exactly.once.support=required` on a worker without EOS (Kafka 3.3 to 4.3: AbstractHerder). */
const WORKER_WITHOUT_EOS = /does not have exactly-once source support enabled/i;

async function validateConfig(client: ConnectClient, desired: ConnectorConfig, name: string, log: Logger | undefined): Promise<void> {
  const validation = await client.validate(desired);
  const eos = validation.fields.find((f) => f.field === 'exactly.once.support' && f.errors.some((e) => WORKER_WITHOUT_EOS.test(e)));
  if (eos) {
    log?.error({ field: eos.field, errors: eos.errors }, 'the Connect worker does not have exactly-once source support enabled');
    throw new OutboxError(
      'CONNECT_EXACTLY_ONCE_DISABLED',
      `connector.exactlyOnce is on, but the Kafka Connect worker does not have exactly-once source support enabled (Connect: "${eos.errors.join('; ')}"); ` +
        `nothing was deployed for connector ${name}. Either set exactly.once.source.support=enabled on every Connect worker (a running cluster: ` +
        'first `preparing` on every worker, then `enabled`, two rolling restarts; the local stack: `OUTBOX_STACK_EXACTLY_ONCE=enabled npm run stack:up` ' +
        'after `npm run stack:down`), or deploy without it: connector.exactlyOnce=false (OUTBOX_CONNECTOR_EXACTLY_ONCE=false).',
      { details: { fields: validation.fields } },
    );
  }
  if (validation.fields.length > 0 || validation.errorCount > 0) {
    for (const f of validation.fields) log?.error({ field: f.field, errors: f.errors }, `invalid ${f.field}`);
    const lines = validation.fields.map((f) => `  - ${f.field}: ${f.errors.join('; ')}`);
    throw new OutboxError(
      'CONNECTOR_CONFIG_INVALID',
      `Kafka Connect rejected the config of connector ${name} (${validation.errorCount} error(s)); nothing was deployed:\n${lines.join('\n')}\n` +
        'Fix the settings named above (database, roles, outbox and connector sections of the config), then deploy again.',
      { details: { fields: validation.fields } },
    );
  }
}

/** The prerequisites (or an error naming what is missing), the slot, and the rows a slot-less start would skip. */
async function readDatabaseSide(config: OutboxConfig, desired: ConnectorConfig, slotName: string): Promise<Pick<GuardInput, 'slot' | 'preSlotRows'> & { server: ServerFacts }> {
  const heartbeat = desired['heartbeat.interval.ms'] !== '0';
  // A snapshot publishes the rows already in the table; no_data and never start at the end of WAL.
  const snapshots = !['no_data', 'never'].includes(desired['snapshot.mode'] as string);
  return withAdmin(config, async (db) => {
    const server = await readServerFacts(db);
    const missing = await missingPrerequisites(db, config, heartbeat);
    if (missing.length > 0) throw prerequisiteError(config, missing);
    const found: SlotInfo | undefined = await readSlot(db, slotName);
    const count = found || snapshots ? 0 : await countUnpublishedRows(db, config);
    return { server, slot: found, preSlotRows: { count, table: `${quoteIdent(config.outbox.schema)}.${quoteIdent(config.outbox.table)}` } };
  });
}





/**
 * Writes the new config of an existing connector. Returns the task config to wait for, or, for a PAUSED
 * or STOPPED connector (which applies it only when resumed), its status.
 */
async function updateExisting(
  { config, client, desired, name, log, progress, resetOffsets }: Deployment,
  diff: ConfigDiff,
): Promise<{ expectTaskConfig: Record<string, string | null> } | { notRunning: ConnectorStatusInfo | undefined }> {
  const before = await client.status(name);
  if (resetOffsets) {
    await client.stop(name);
    await waitForState(client, name, 'STOPPED', config.connector.deployTimeoutMs);
    await client.resetOffsets(name);
    await forgetSlotState(config, desired['slot.name'] as string);
  }
  await client.putConfig(name, desired);
  if (resetOffsets) await client.resume(name);
  // A config update does not restart a FAILED task: the fix just written would never run.
  const failedBefore = before && (before.connector.state === 'FAILED' || before.tasks.some((t) => t.state === 'FAILED'));
  if (failedBefore && !resetOffsets) await client.restart(name, { includeTasks: true, onlyFailed: true });
  progress('write', `updated connector ${name}${resetOffsets ? ' (stored offsets reset)' : ''}`);
  if (!resetOffsets && before && (before.connector.state === 'PAUSED' || before.connector.state === 'STOPPED')) {
    log?.warn({ step: 'wait' }, `connector ${name} is ${before.connector.state}: the new config applies when it is resumed (outbox connector:resume)`);
    return { notRunning: await client.status(name) };
  }
  // Until the tasks carry the new values, a RUNNING status is the old tasks'.
  return {
    expectTaskConfig: Object.fromEntries([
      ...[...diff.added, ...diff.changed].filter((d) => !isSecretKey(d.key)).map((d) => [d.key, desired[d.key] as string]),
      ...diff.removed.filter((d) => !isSecretKey(d.key)).map((d) => [d.key, null]),
    ]) as Record<string, string | null>,
  };
}

/** Creates the connector STOPPED, guards the offsets a deleted namesake left, then resumes it. */
async function createStoppedThenResume(d: Deployment): Promise<void> {
  const { client, desired, name } = d;
  await client.create(name, desired, 'STOPPED');
  let leftover: Record<string, unknown> | undefined;
  try {
    leftover = await d.storedOffset();
    const findings = d.guard({ connector: 'absent', offset: leftover });
    if (!accept(d, findings)) throw refuse(name, findings, true, d.server);
    if (d.resetOffsets) {
      await client.resetOffsets(name);
      await forgetSlotState(d.config, desired['slot.name'] as string);
    }
    await client.resume(name);
  } catch (error) {
    // Never leave a half-made, STOPPED connector behind: the next deploy would find it "unchanged".
    await client.delete(name).catch(() => false);
    throw error;
  }
  const how = d.resetOffsets ? ' (stored offsets of a previous connector of this name reset)' : leftover ? ' (resuming from offsets a previous connector of this name stored)' : '';
  d.progress('write', `created connector ${name}${how}`);
}
