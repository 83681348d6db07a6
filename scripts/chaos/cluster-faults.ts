/**
 * The chaos run's faults on the stack's cluster profile: which broker leads the routed topic, which node
 * is the active KRaft controller, which Connect worker runs the task, and a PostgreSQL primary failover.
 * Each victim is found at the moment of the fault, on the real cluster, never assumed.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { OutboxConfig } from 'outbox-router/config';
import { createConnectClient } from 'outbox-router/connector';
import { createKafka } from 'outbox-router/kafka';
import type { ServiceName, Stack } from '../stack/stack';

/** The stack service listening on `port` (a broker's or a worker's), from `stack status`. */
async function serviceOnPort(stack: Stack, port: number, what: string): Promise<ServiceName> {
  const service = (await stack.status()).find((s) => s.ports[0] === port);
  if (!service) throw new Error(`chaos: no service of the ${stack.profile} stack listens on port ${port} (${what})`);
  return service.name;
}

/** The broker leading the most partitions of `topic` (ties: the lowest node id). */
export async function brokerLeading(stack: Stack, config: OutboxConfig, topic: string): Promise<{ service: ServiceName; nodeId: number; partitions: number; of: number }> {
  const admin = createKafka(config, { role: 'chaos' }).admin();
  await admin.connect();
  try {
    const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
    const partitions = topics[0]?.partitions ?? [];
    const led = new Map<number, number>();
    for (const p of partitions) led.set(p.leader, (led.get(p.leader) ?? 0) + 1);
    const [nodeId, count] = [...led].sort((a, b) => b[1] - a[1] || a[0] - b[0])[0] ?? [];
    if (nodeId === undefined || count === undefined) throw new Error(`chaos: ${topic} has no partition leader`);
    const broker = (await admin.describeCluster()).brokers.find((b) => b.nodeId === nodeId);
    if (!broker) throw new Error(`chaos: broker ${nodeId}, leader of ${topic}, is not in the cluster metadata`);
    return { service: await serviceOnPort(stack, broker.port, `broker ${nodeId}`), nodeId, partitions: count, of: partitions.length };
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

/**
 * The active KRaft controller. A broker's metadata answer names a random broker as "controller" under
 * KRaft (clients cannot reach the quorum), and kafkajs has no DescribeQuorum, so this reads what each
 * node persists on every election: `<log.dirs>/__cluster_metadata-0/quorum-state`, a JSON object with the
 * leader's id and epoch. The newest epoch among the nodes' files names the leader. It looks one level down
 * only (each broker's log.dirs in the state folder): a walk through the brokers' partition folders meets
 * folders Kafka is deleting at that moment (`<topic>-<n>.<id>-delete`), and failed with ENOENT.
 */
export function activeController(stateDir: string): { nodeId: number; epoch: number } | undefined {
  let best: { nodeId: number; epoch: number } | undefined;
  for (const entry of readdirSync(stateDir)) {
    let text: string;
    try {
      text = readFileSync(join(stateDir, entry, '__cluster_metadata-0', 'quorum-state'), 'utf8');
    } catch {
      continue; // not a broker's log.dirs, or no election recorded yet
    }
    const leader = quorumLeader(text);
    if (leader && (!best || leader.epoch > best.epoch)) best = leader;
  }
  return best;
}

/** Pure: the leader a quorum-state file records (leaderId -1: no leader known). */
export function quorumLeader(text: string): { nodeId: number; epoch: number } | undefined {
  try {
    const state = JSON.parse(text) as { leaderId?: unknown; leaderEpoch?: unknown };
    if (typeof state.leaderId !== 'number' || typeof state.leaderEpoch !== 'number' || state.leaderId < 0) return undefined;
    return { nodeId: state.leaderId, epoch: state.leaderEpoch };
  } catch {
    return undefined; // a file being rewritten
  }
}

/** The broker service of a node id (combined KRaft nodes: the controller's id is a broker's). */
export async function brokerService(stack: Stack, config: OutboxConfig, nodeId: number): Promise<ServiceName> {
  const admin = createKafka(config, { role: 'chaos' }).admin();
  await admin.connect();
  try {
    const broker = (await admin.describeCluster()).brokers.find((b) => b.nodeId === nodeId);
    if (!broker) throw new Error(`chaos: node ${nodeId} is not in the cluster metadata`);
    return await serviceOnPort(stack, broker.port, `node ${nodeId}`);
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

/** The Connect worker running the connector's task 0 (its worker_id is the worker's advertised host:port). */
export async function workerRunningTask(stack: Stack, config: OutboxConfig): Promise<ServiceName> {
  const status = await createConnectClient(config.connect).status(config.connector.name);
  const workerId = status?.tasks[0]?.worker_id;
  const port = Number(workerId?.split(':').at(-1));
  if (!workerId || !Number.isInteger(port)) throw new Error(`chaos: connector ${config.connector.name} has no running task (${JSON.stringify(status?.tasks ?? [])})`);
  return serviceOnPort(stack, port, `worker ${workerId}`);
}
