/** src/connector/wait.ts with a fake Connect client: RUNNING must settle, new task configs must apply, FAILED throws. */
import type { ConnectClient, ConnectorStatusInfo } from '../../../src/connector';
import { failureHint, traceHead, waitForRunning } from '../../../src/connector/wait';
import { rejection } from '../../support/expect-error';

type State = ConnectorStatusInfo['connector']['state'];
const status = (connector: State, ...tasks: Array<{ state: State; trace?: string }>): ConnectorStatusInfo => ({
  name: 'c',
  connector: { state: connector, worker_id: 'w:8083' },
  tasks: tasks.map((t, id) => ({ id, worker_id: 'w:8083', ...t })),
});

function fakeClient(statuses: Array<ConnectorStatusInfo | undefined>, taskConfigs: Array<Record<string, string>> = [{}]) {
  let polls = 0;
  const client = {
    status: async () => statuses[Math.min(polls++, statuses.length - 1)],
    tasks: async () => taskConfigs.map((config, task) => ({ id: { task }, config })),
  } as unknown as ConnectClient;
  return { client, polls: () => polls };
}


const trace = Array.from({ length: 40 }, (_, i) => (i === 0 ? 'java.lang.NoClassDefFoundError: org/apache/kafka/common/utils/Sanitizer' : `\tat frame${i}`)).join('\n');

describe('waitForRunning', () => {
  it('waits through "no status yet" and no tasks until connector and tasks are RUNNING', async () => {
    const { client, polls } = fakeClient([undefined, status('RUNNING'), status('RUNNING', { state: 'RUNNING' })]);
    const result = await waitForRunning(client, 'c', { timeoutMs: 5_000, pollMs: 1, settleMs: 0 });
    expect(result.tasks[0]?.state).toBe('RUNNING');
    expect(polls()).toBe(3);
  });

  it('throws CONNECTOR_FAILED with the first 15 trace lines of a failed task and a hint', async () => {
    const { client } = fakeClient([status('RUNNING', { state: 'RUNNING' }), status('RUNNING', { state: 'FAILED', trace })]);
    const error = await rejection(waitForRunning(client, 'c', { timeoutMs: 5_000, pollMs: 1, settleMs: 1_000 }));
    expect(error.code).toBe('CONNECTOR_FAILED');
    expect(error.message).toContain('task 0 is FAILED on worker w:8083');
    expect(error.message).toContain('Sanitizer');
    expect(error.message).toContain('frame14');
    expect(error.message).not.toContain('frame15');
    expect(error.message).toContain('does not match the Kafka Connect runtime');
  });

  it('does not accept RUNNING before the tasks carry the new config', async () => {
    // The tasks show the old config for their first three reads, then the new one: counted reads, not a
    // timer, so a slow machine cannot change what the test sees (a 30 ms timer once fired before the third poll).
    let reads = 0;
    const client = {
      status: async () => status('RUNNING', { state: 'RUNNING' }),
      tasks: async () => [{ id: { task: 0 }, config: { 'poll.interval.ms': ++reads > 3 ? '50' : '20' } }],
    } as unknown as ConnectClient;
    await waitForRunning(client, 'c', { timeoutMs: 5_000, pollMs: 1, settleMs: 0, expectTaskConfig: { 'poll.interval.ms': '50', removed: null } });
    expect(reads).toBe(4);
  });

  it('restarts the connector instance once when its status stays STOPPED while every task runs (a stale status), then sees RUNNING', async () => {
    // Connect keeps answering the stale status until the connector instance is restarted.
    let restarted: unknown;
    const client = {
      status: async () => (restarted ? status('RUNNING', { state: 'RUNNING' }) : status('STOPPED', { state: 'RUNNING' })),
      tasks: async () => [],
      restart: async (_name: string, options: unknown) => void (restarted = options),
    } as unknown as ConnectClient;
    const told: string[] = [];
    const result = await waitForRunning(client, 'c', { timeoutMs: 5_000, pollMs: 5, settleMs: 0, staleStatusMs: 50, onStaleStatus: (m) => told.push(m) });
    expect(result.connector.state).toBe('RUNNING');
    expect(restarted).toEqual({ includeTasks: false, onlyFailed: false });
    expect(told).toEqual([expect.stringMatching(/^connector c reports STOPPED while its 1 task\(s\) run, for \d+ s: a stale status; restarting the connector instance \(not its tasks\)/)]);
  });

  it('does not restart anything for a connector without tasks yet, or one whose tasks are not all RUNNING', async () => {
    let restarts = 0;
    for (const stale of [status('STOPPED'), status('PAUSED', { state: 'RUNNING' }, { state: 'UNASSIGNED' })]) {
      const client = { status: async () => stale, tasks: async () => [], restart: async () => void (restarts += 1) } as unknown as ConnectClient;
      await rejection(waitForRunning(client, 'c', { timeoutMs: 80, pollMs: 5, staleStatusMs: 10 }));
    }
    expect(restarts).toBe(0);
  });

  it('times out with the last state seen, as a retriable CONNECTOR_TIMEOUT', async () => {
    const { client } = fakeClient([status('RUNNING', { state: 'UNASSIGNED' })]);
    const error = await rejection(waitForRunning(client, 'c', { timeoutMs: 30, pollMs: 5 }));
    expect(error.code).toBe('CONNECTOR_TIMEOUT');
    expect(error.retriable).toBe(true);
    expect(error.message).toContain('task 0 UNASSIGNED');
  });

  it('requires RUNNING to hold for the settle time', async () => {
    const { client } = fakeClient([status('RUNNING', { state: 'RUNNING' }), status('RUNNING', { state: 'RUNNING' }), status('RUNNING', { state: 'FAILED', trace: 'boom' })]);
    await expect(waitForRunning(client, 'c', { timeoutMs: 5_000, pollMs: 5, settleMs: 1_000 })).rejects.toMatchObject({ code: 'CONNECTOR_FAILED' });
  });
});

describe('trace helpers', () => {
  it('cuts traces and picks hints', () => {
    expect(traceHead('a\nb\nc', 2)).toBe('a\nb');
    expect(traceHead(undefined)).toBeUndefined();
    expect(failureHint('org.postgresql.util.PSQLException: ERROR: publication "p" does not exist')).toContain('db:provision');
    expect(failureHint('something else')).toContain('connector:restart');
  });
});
