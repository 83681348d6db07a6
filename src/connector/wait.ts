import { OutboxError } from '../errors';
import type { ConnectClient, ConnectorStatusInfo } from './connect-client';
import { sleep } from '../retry';

export const TRACE_LINES = 15;

export function traceHead(trace: string | undefined, lines = TRACE_LINES): string | undefined {
  return trace?.split('\n').slice(0, lines).join('\n');
}

/** Known causes, recognised in a Java stack trace (there is no error code to branch on). */
const TRACE_HINTS: Array<[RegExp, string]> = [
  [/NoClassDefFoundError|ClassNotFoundException/, 'The Debezium plugin does not match the Kafka Connect runtime (a class it needs is missing): use a Debezium release built for this Kafka version.'],
  [/password authentication failed/, 'Connect resolved the password reference to a wrong value: check connector.passwordRef and the worker\'s environment (OUTBOX_CDC_PASSWORD).'],
  [/publication .* does not exist/i, 'Run `outbox db:provision` to create the publication.'],
  [/replication slot .* is active for PID/i, 'Another process streams from this slot: stop it or choose another connector.slotName.'],
  [/permission denied/i, 'The CDC role lacks a grant: rerun `outbox db:provision`.'],
  [
    /no longer available on the server/,
    "The connector's stored offset is older than what its replication slot can stream (slot dropped or recreated): the events in between are lost. Reconcile them, then `outbox connector:deploy --force` resets the offsets.",
  ],
];

export function failureHint(trace: string | undefined): string {
  const hit = trace ? TRACE_HINTS.find(([re]) => re.test(trace)) : undefined;
  return hit ? hit[1] : 'Fix the cause shown in the trace, then run `outbox connector:restart`.';
}

export interface WaitOptions {
  timeoutMs: number;
  pollMs?: number;
  /** RUNNING must hold this long: a task can fail moments after it reported RUNNING. */
  settleMs?: number;
  /** Task config entries that must already be in effect (null: absent), so the old tasks' RUNNING does not count. */
  expectTaskConfig?: Readonly<Record<string, string | null>>;
  onProgress?: (status: ConnectorStatusInfo | undefined) => void;
  /**
   * Every task RUNNING while the connector's own status still says STOPPED, PAUSED or UNASSIGNED for this
   * long (default 20 s) is a stale status, not a state: tasks run only under a started connector. Seen on
   * a two-worker Connect cluster under load, after a connector made STOPPED was resumed: its status stayed
   * STOPPED for the whole 90 s the deploy waited, with the task streaming. A restart of the connector
   * instance alone (no task restarts; POST /connectors/<name>/restart) makes its worker write the status
   * again. Done once; 0 turns it off.
   */
  staleStatusMs?: number;
  /** Told when the stale status was seen and the connector instance restarted. */
  onStaleStatus?: (message: string) => void;
}

function summary(status: ConnectorStatusInfo | undefined): string {
  if (!status) return 'no status yet';
  const tasks = status.tasks.map((t) => `task ${t.id} ${t.state}`).join(', ') || 'no tasks yet';
  return `connector ${status.connector.state}, ${tasks}`;
}

export function connectorFailure(name: string, status: ConnectorStatusInfo): OutboxError | undefined {
  const task = status.tasks.find((t) => t.state === 'FAILED');
  const failed = task ?? (status.connector.state === 'FAILED' ? { id: undefined, ...status.connector } : undefined);
  if (!failed) return undefined;
  const who = task ? `task ${task.id}` : 'the connector instance';
  const head = traceHead(failed.trace);
  return new OutboxError(
    'CONNECTOR_FAILED',
    `Connector ${name} failed: ${who} is FAILED on worker ${failed.worker_id}. ${failureHint(failed.trace)}\n${head ?? '(no trace reported)'}`,
    { details: { connector: name, task: task?.id, worker: failed.worker_id, trace: head } },
  );
}

async function taskConfigsApplied(client: ConnectClient, name: string, expect: Readonly<Record<string, string | null>>): Promise<boolean> {
  const tasks = await client.tasks(name);
  return tasks.length > 0 && tasks.every((t) => Object.entries(expect).every(([k, v]) => (v === null ? !(k in t.config) : t.config[k] === v)));
}

/** Polls until the connector and every task are RUNNING (and stay so for settleMs); a FAILED task throws at once. */
export async function waitForRunning(client: ConnectClient, name: string, options: WaitOptions): Promise<ConnectorStatusInfo> {
  const pollMs = options.pollMs ?? 250;
  const settleMs = options.settleMs ?? 1_500;
  const deadline = Date.now() + options.timeoutMs;
  const staleStatusMs = options.staleStatusMs ?? 20_000;
  let runningSince: number | undefined;
  let staleSince: number | undefined;
  let restarted = false;
  let last: ConnectorStatusInfo | undefined;
  for (;;) {
    last = await client.status(name);
    options.onProgress?.(last);
    if (last && !restarted && staleStatusMs > 0 && staleConnectorStatus(last)) {
      staleSince ??= Date.now();
      if (Date.now() - staleSince >= staleStatusMs) {
        restarted = true;
        options.onStaleStatus?.(
          `connector ${name} reports ${last.connector.state} while its ${last.tasks.length} task(s) run, for ${Math.round((Date.now() - staleSince) / 1000)} s: a stale status; restarting the connector instance (not its tasks) so its worker reports it again`,
        );
        await client.restart(name, { includeTasks: false, onlyFailed: false });
      }
    } else {
      staleSince = undefined;
    }
    if (last) {
      const error = connectorFailure(name, last);
      // A FAILED status from before a config update is the old tasks' (deploy restarts them): only a
      // failure of tasks that carry the new config is this deploy's.
      if (error && (!options.expectTaskConfig || (await taskConfigsApplied(client, name, options.expectTaskConfig)))) throw error;
      const running = last.connector.state === 'RUNNING' && last.tasks.length > 0 && last.tasks.every((t) => t.state === 'RUNNING');
      const applied = !running || !options.expectTaskConfig || (await taskConfigsApplied(client, name, options.expectTaskConfig));
      if (running && applied) {
        runningSince ??= Date.now();
        if (Date.now() - runningSince >= settleMs) return last;
      } else {
        runningSince = undefined;
      }
    }
    if (Date.now() > deadline) {
      throw new OutboxError(
        'CONNECTOR_TIMEOUT',
        `Connector ${name} was not RUNNING within ${options.timeoutMs} ms (connector.deployTimeoutMs); last seen: ${summary(last)}. ` +
          'Check `outbox connector:status` and the Connect log (`npm run stack:logs -- connect`); a busy worker may just need a longer timeout.',
        { retriable: true, details: { connector: name, last: summary(last) } },
      );
    }
    await sleep(pollMs);
  }
}

/** Pure: every task RUNNING under a connector whose own status says it is not started. */
export function staleConnectorStatus(status: ConnectorStatusInfo): boolean {
  return ['STOPPED', 'PAUSED', 'UNASSIGNED'].includes(status.connector.state) && status.tasks.length > 0 && status.tasks.every((t) => t.state === 'RUNNING');
}

/** Polls until Connect no longer lists the connector. */
export async function waitForGone(client: ConnectClient, name: string, timeoutMs: number, pollMs = 250): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await client.list()).includes(name)) {
    if (Date.now() > deadline) {
      throw new OutboxError('CONNECTOR_TIMEOUT', `Connector ${name} was still listed by Kafka Connect ${timeoutMs} ms after DELETE; its slot was left alone. Run connector:delete again.`, {
        retriable: true,
        details: { connector: name },
      });
    }
    await sleep(pollMs);
  }
}

/** Polls until the connector reports the state (used for STOPPED before offsets can be reset). */
export async function waitForState(client: ConnectClient, name: string, state: string, timeoutMs: number, pollMs = 250): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await client.status(name);
    if (status?.connector.state === state) return;
    if (Date.now() > deadline) {
      throw new OutboxError('CONNECTOR_TIMEOUT', `Connector ${name} did not reach ${state} within ${timeoutMs} ms (last: ${summary(status)}).`, {
        retriable: true,
        details: { connector: name, state },
      });
    }
    await sleep(pollMs);
  }
}
