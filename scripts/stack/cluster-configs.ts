import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { kafkaNodeDataDir, type StackPaths } from './paths';
import { CLUSTER, CLUSTER_BROKERS, KAFKA, STACK_HOST } from './settings';
import { renderTemplateFile } from './template';
import type { ExactlyOnceSource } from './config';

/** The templates of the cluster profile, in connect/: one broker's and one worker's properties. */
export const CLUSTER_TEMPLATES = Object.freeze({ kafka: 'kafka-cluster-node.properties', connect: 'connect-cluster-worker.properties' });

export interface ClusterRenderOptions {
  exactlyOnceSource: ExactlyOnceSource;
  rebalanceDelayMs?: number;
}

/** The `${…}` values of each cluster node's template, by node name (kafka-1 … connect-2). */
export function clusterTemplateValues(paths: Pick<StackPaths, 'stateDir' | 'pluginPath'>, options: ClusterRenderOptions): Record<string, Record<string, string | number>> {
  const shared = { host: STACK_HOST, replicationFactor: CLUSTER.replicationFactor, minInsyncReplicas: CLUSTER.minInsyncReplicas };
  const quorumVoters = CLUSTER.kafkaNodes.map((n) => `${n.nodeId}@${STACK_HOST}:${n.controllerPort}`).join(',');
  const values: Record<string, Record<string, string | number>> = {};
  for (const node of CLUSTER.kafkaNodes) {
    values[node.name] = { ...shared, nodeId: node.nodeId, quorumVoters, kafkaPort: node.port, kafkaControllerPort: node.controllerPort, dataDir: kafkaNodeDataDir(paths, node.name) };
  }
  for (const worker of CLUSTER.connectWorkers) {
    values[worker.name] = {
      ...shared,
      bootstrapServers: CLUSTER_BROKERS.join(','),
      connectPort: worker.port,
      pluginPath: paths.pluginPath,
      connectGroupId: KAFKA.connectGroupId,
      connectConfigTopic: KAFKA.connectConfigTopic,
      connectOffsetTopic: KAFKA.connectOffsetTopic,
      connectStatusTopic: KAFKA.connectStatusTopic,
      rebalanceDelayMs: options.rebalanceDelayMs ?? CLUSTER.scheduledRebalanceMaxDelayMs,
      exactlyOnceSource: options.exactlyOnceSource,
    };
  }
  return values;
}

/** Writes <configDir>/kafka-1.properties … connect-2.properties (log4j2.properties is the single stack's). */
export function renderClusterConfigs(paths: StackPaths, options: ClusterRenderOptions): void {
  const values = clusterTemplateValues(paths, options);
  mkdirSync(paths.configDir, { recursive: true });
  for (const [name, nodeValues] of Object.entries(values)) {
    const template = name.startsWith('kafka-') ? CLUSTER_TEMPLATES.kafka : CLUSTER_TEMPLATES.connect;
    writeFileSync(join(paths.configDir, `${name}.properties`), renderTemplateFile(join(paths.connectTemplates, template), nodeValues));
  }
}
