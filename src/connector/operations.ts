import type { OutboxConfig } from '../config';
import { OutboxError, isOutboxError } from '../errors';
import type { Logger } from '../log';
import { connectStatus, createConnectClient, type ConnectClient, type ConnectorState, type ConnectorStatusInfo } from './connect-client';
import { dropPublication, dropSlot, forgetCleanupState, readSlot, withAdmin } from './database';
import { checkPublication, type PublicationCheck } from './publication-check';
import type { SlotInfo } from './slot-guard';
import { dropRefusal, readUnconfirmed, type Unconfirmed } from './drop-guard';
import { offsetForServer } from './slot-guard';
import { traceHead, waitForGone, waitForState } from './wait';

export interface OperationOptions {
  client?: ConnectClient;
  log?: Logger;
}

export function notFound(config: OutboxConfig, name = config.connector.name): OutboxError {
  return new OutboxError(
    'CONNECTOR_NOT_FOUND',
    `Kafka Connect at ${config.connect.url} has no connector named ${name}. Deploy it with \`outbox connector:deploy\`, ` +
      'or set connector.name (OUTBOX_CONNECTOR_NAME) to the one you meant.',
    { details: { connector: name } },
  );
}

function clientFor(config: OutboxConfig, options: OperationOptions): ConnectClient {
  return options.client ?? createConnectClient(config.connect);
}

/** Runs a call against one connector; Connect's 404 becomes CONNECTOR_NOT_FOUND. */
async function onConnector<T>(config: OutboxConfig, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (connectStatus(error) === 404) throw notFound(config);
    throw error;
  }
}

export interface ConnectorStatusReport {
  connector: string;
  url: string;
  exists: boolean;
  state?: ConnectorState;
  worker?: string;
  trace?: string;
  tasks: Array<{ id: number; state: ConnectorState; worker: string; trace?: string }>;
  slotName: string;
  /** null: no such slot; undefined: it could not be read (see slotError). */
  slot?: SlotInfo | null;
  slotError?: string;
  /** Whether the publication still publishes inserts of the outbox table (undefined: not readable, see slotError). */
  publication?: PublicationCheck;
  /** Connector and every task RUNNING, the slot streamed by it, and the publication publishing outbox inserts. */
  healthy: boolean;
}

/**
 * Connect's view (connector, worker, tasks with the head of any trace) plus the slot and the
 * publication, read with the admin settings. A drifted publication is unhealthy even while everything
 * runs: the heartbeat keeps the slot moving while outbox inserts are no longer decoded.
 */
export async function connectorStatus(config: OutboxConfig, options: OperationOptions = {}): Promise<ConnectorStatusReport> {
  const client = clientFor(config, options);
  const name = config.connector.name;
  const [status, stored] = await Promise.all([client.status(name), client.getConfig(name)]);
  const slotName = stored?.['slot.name'] ?? config.connector.slotName;
  let slot: SlotInfo | null | undefined;
  let slotError: string | undefined;
  let publication: PublicationCheck | undefined;
  const { publication: pubName, schema, table } = config.outbox;
  try {
    await withAdmin(config, async (db) => {
      slot = (await readSlot(db, slotName)) ?? null;
      publication = await checkPublication(db, { publication: stored?.['publication.name'] ?? pubName, schema, table });
    });
  } catch (error) {
    slotError = isOutboxError(error) ? error.message : (error as Error).message;
  }
  const info: ConnectorStatusInfo | undefined = status;
  const tasks = (info?.tasks ?? []).map((t) => ({ id: t.id, state: t.state, worker: t.worker_id, trace: traceHead(t.trace) }));
  const running = info?.connector.state === 'RUNNING' && tasks.length > 0 && tasks.every((t) => t.state === 'RUNNING');
  return {
    connector: name,
    url: config.connect.url,
    exists: stored !== undefined || info !== undefined,
    state: info?.connector.state,
    worker: info?.connector.worker_id,
    trace: traceHead(info?.connector.trace),
    tasks,
    slotName,
    slot,
    slotError,
    publication,
    healthy: Boolean(running && slot?.active && publication?.ok),
  };
}

/** `POST /connectors/{name}/restart?includeTasks=true&onlyFailed=true`: restarts what failed, leaves the rest running. */
export async function restartConnector(config: OutboxConfig, options: OperationOptions = {}): Promise<void> {
  const client = clientFor(config, options);
  await onConnector(config, () => client.restart(config.connector.name, { includeTasks: true, onlyFailed: true }));
}

export async function pauseConnector(config: OutboxConfig, options: OperationOptions = {}): Promise<void> {
  const client = clientFor(config, options);
  await onConnector(config, () => client.pause(config.connector.name));
}

export async function resumeConnector(config: OutboxConfig, options: OperationOptions = {}): Promise<void> {
  const client = clientFor(config, options);
  await onConnector(config, () => client.resume(config.connector.name));
}

export interface DeleteOptions extends OperationOptions {
  /** Also reset the connector's stored offsets, drop its replication slot and drop the publication. */
  dropSlot?: boolean;
  /**
   * With dropSlot: drop even when outbox rows the connector has not published would be discarded
   * (drop-guard.ts). Cleanup code that means to throw the pipeline away passes it.
   */
  force?: boolean;
  /** With dropSlot: leave the publication (a re-snapshot deploys again on it at once). */
  keepPublication?: boolean;
  timeoutMs?: number;
  /** With dropSlot: the slot peek's statement timeout in ms (0: none; slot-peek.ts). */
  peekTimeoutMs?: number;
}

export interface DeleteResult {
  connector: string;
  deleted: boolean;
  offsetsReset: boolean;
  slotName: string;
  slotDropped: boolean;
  publicationDropped: boolean;
  /** With dropSlot: what the slot had not confirmed when it was dropped (null: no slot). */
  unconfirmed?: Unconfirmed | null;
}

/**
 * DELETE, then wait until Connect no longer lists the connector. With dropSlot: first STOP it and
 * reset its stored offsets (a later connector of the same name would otherwise resume from an LSN no
 * slot holds any more: DBZ-5739), and only once it is gone, drop the slot (when no walsender holds it)
 * and the publication.
 */
export async function deleteConnector(config: OutboxConfig, options: DeleteOptions = {}): Promise<DeleteResult> {
  const client = clientFor(config, options);
  const name = config.connector.name;
  const timeoutMs = options.timeoutMs ?? config.connector.deployTimeoutMs;
  const stored = await client.getConfig(name);
  const slotName = stored?.['slot.name'] ?? config.connector.slotName;
  const result: DeleteResult = { connector: name, deleted: false, offsetsReset: false, slotName, slotDropped: false, publicationDropped: false };

  /** Measures what the drop would discard; refuses (restoring the connector's state) unless forced. */
  const guardDrop = async (offset: Record<string, unknown> | undefined, restore: () => Promise<void>) => {
    const work = await withAdmin(config, (db) => readUnconfirmed(db, config, slotName, offset, timeoutMs, { peekTimeoutMs: options.peekTimeoutMs, log: options.log }));
    result.unconfirmed = work ?? null;
    const refusal = dropRefusal(name, work);
    if (!refusal) return;
    if (options.force) {
      options.log?.warn({ step: 'delete', ...work }, `forced: ${refusal.message}`);
      return;
    }
    await restore();
    throw refusal;
  };

  if (stored) {
    if (options.dropSlot) {
      const before = (await client.status(name))?.connector.state;
      await client.stop(name);
      await waitForState(client, name, 'STOPPED', timeoutMs);
      await guardDrop(offsetForServer(await client.offsets(name), stored['topic.prefix'] ?? config.connector.topicPrefix), async () => {
        if (before === 'PAUSED') await client.pause(name);
        else if (before !== 'STOPPED') await client.resume(name);
      });
      await client.resetOffsets(name);
      result.offsetsReset = true;
      options.log?.info({ step: 'delete' }, `stopped ${name} and reset its stored offsets`);
    }
    result.deleted = await client.delete(name);
    await waitForGone(client, name, timeoutMs);
    options.log?.info({ step: 'delete' }, `connector ${name} deleted`);
  } else {
    options.log?.info({ step: 'delete' }, `no connector named ${name} at ${config.connect.url}`);
    if (options.dropSlot) await guardDrop(undefined, async () => {});
  }
  if (options.dropSlot) {
    await withAdmin(config, async (db) => {
      result.slotDropped = await dropSlot(db, slotName, timeoutMs);
      await forgetCleanupState(db, config.outbox, slotName, { unregister: true });
      if (!options.keepPublication) result.publicationDropped = await dropPublication(db, config.outbox.publication);
    });
    options.log?.info({ step: 'delete' }, `slot ${slotName} ${result.slotDropped ? 'dropped' : 'was absent'}; publication ${config.outbox.publication} ${result.publicationDropped ? 'dropped' : 'was absent'}`);
  }
  return result;
}
