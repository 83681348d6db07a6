import type { OutboxConfig } from '../config';
import { OutboxError } from '../errors';
import { consumerName } from '../router/options';
import { ROUTED_BY_VALUE, topicNames } from '../topics';

/**
 * The Kafka ACLs each part of the pipeline needs, derived from the config every other command reads.
 * Pure: no network; what the broker has is not consulted. docs/kafka-acls.md shows the result.
 *
 * What each principal does with Kafka was read from the code that does it (named in each `why`); what
 * Kafka Connect needs is from Apache Kafka's Connect user guide, "ACL requirements"
 * (docs/kafka-connect/user-guide.md in apache/kafka, 2026), which says of the worker: "Read Group
 * `group.id` of the Connect cluster", Read and Write on each of config.storage.topic,
 * offset.storage.topic and status.storage.topic, Create on each "Only necessary if the … topic for
 * Connect does not exist yet", and "Write / Describe TransactionalId `connect-cluster-${groupId}` …
 * Only necessary if exactly-once support is enabled"; of a source connector: "Write Topic topic(s) used
 * as the destination", "Create Topic … Only necessary if `topic.creation.enable` is `true` and the
 * topic(s) do not exist yet", "Write / Describe TransactionalId `${groupId}-${connector}-${taskId}`"
 * with exactly-once, and of IdempotentWrite on the cluster: "deprecated as of 2.8 and will only be
 * necessary for Connect clusters running on pre-2.8 Kafka clusters" (hence acls.idempotentWriteAcl).
 *
 * Describe is not granted beside Read or Write: Kafka's authorizer implies it from Read, Write, Delete
 * and Alter (and DescribeConfigs from AlterConfigs), so a separate Describe ACL would only be noise.
 */

export const ACL_RESOURCE_TYPES = ['TOPIC', 'GROUP', 'CLUSTER', 'TRANSACTIONAL_ID'] as const;
export type AclResourceType = (typeof ACL_RESOURCE_TYPES)[number];
export const ACL_PATTERN_TYPES = ['LITERAL', 'PREFIXED'] as const;
export type AclPatternType = (typeof ACL_PATTERN_TYPES)[number];
export const ACL_OPERATIONS = ['Read', 'Write', 'Create', 'Delete', 'Describe', 'DescribeConfigs', 'IdempotentWrite'] as const;
export type AclOperation = (typeof ACL_OPERATIONS)[number];

/** The parts of the pipeline that talk to Kafka, each with a principal of its own (acls.*Principal). */
export const ACL_COMPONENTS = ['connect', 'connector', 'router', 'dlq-replay', 'relay', 'status', 'console'] as const;
export type AclComponent = (typeof ACL_COMPONENTS)[number];

/** The cluster resource's one name, as kafka-acls.sh and the authorizer write it. */
export const CLUSTER_RESOURCE_NAME = 'kafka-cluster';

/**
 * The throw-away consumer groups of the dead-letter readers, named `<prefix><uuid>`: `dlq:replay`'s
 * (src/router/dlq-read.ts, deleted after the read) and the console's (src/console/dlq-cache.ts).
 * A unit test reads both files for these prefixes.
 */
export const REPLAY_GROUP_PREFIX = 'outbox-dlq-replay-';
export const CONSOLE_GROUP_PREFIX = 'outbox-console-';

export interface AclEntry {
  readonly principal: string;
  readonly resourceType: AclResourceType;
  readonly resourceName: string;
  readonly patternType: AclPatternType;
  readonly operation: AclOperation;
  readonly permission: 'ALLOW';
  readonly host: '*';
  /** Why this principal needs it: shown by `--explain`, in the Strimzi YAML's comments and in JSON. */
  readonly why: string;
  /** The part(s) of the pipeline it is for; two parts sharing a principal share an entry. */
  readonly components: readonly AclComponent[];
}

export type AclPlan = readonly AclEntry[];

export interface AclReport {
  /** Each principal with the parts of the pipeline that use it, in plan order. */
  readonly principals: ReadonlyArray<{ principal: string; components: readonly AclComponent[] }>;
  readonly plan: AclPlan;
  /** What the plan could not make tight, said plainly (e.g. a prefix that also covers the dead-letter topics). */
  readonly warnings: readonly string[];
}

export interface PlanOptions {
  /** Only these parts (default: all). */
  components?: readonly AclComponent[];
}

/** A set of topics as ACL resources: one prefix, or each name. */
interface TopicSet {
  readonly what: string;
  readonly resources: ReadonlyArray<{ name: string; patternType: AclPatternType }>;
}

/**
 * The topics made from a `${routedByValue}` template, as tight as ACLs can name them: each topic
 * (LITERAL) when acls.aggregateTypes lists the aggregate types, else the template's fixed prefix
 * (PREFIXED). ACLs have no suffix or regex pattern, so a template with nothing before the placeholder
 * cannot be covered without the list.
 */
function topicSet(template: string, fill: (aggregateType: string) => string, aggregateTypes: readonly string[], what: string): TopicSet {
  if (aggregateTypes.length > 0) return { what, resources: [...new Set(aggregateTypes)].sort().map((t) => ({ name: fill(t), patternType: 'LITERAL' as const })) };
  const prefix = template.slice(0, template.indexOf(ROUTED_BY_VALUE));
  if (prefix === '') {
    throw new OutboxError(
      'ACL_TOPICS_UNDERIVABLE',
      `The ${what} (${JSON.stringify(template)}, from connector.topicReplacement) have no fixed prefix, and Kafka ACLs match a topic only by its whole name or a prefix: ` +
        'no ACL could cover them short of every topic. List the aggregate types (acls.aggregateTypes, OUTBOX_ACLS_AGGREGATE_TYPES=order,payment) to get one LITERAL ACL per topic, ' +
        'or give the replacement a fixed prefix such as outbox.event.${routedByValue}.',
      { details: { template } },
    );
  }
  return { what, resources: [{ name: prefix, patternType: 'PREFIXED' }] };
}

/** Builds the entries; the same principal, resource and operation asked twice become one entry with both reasons. */
class PlanBuilder {
  private readonly entries = new Map<string, { entry: AclEntry; whys: string[]; components: Set<AclComponent> }>();

  add(component: AclComponent, principal: string, resourceType: AclResourceType, resourceName: string, patternType: AclPatternType, operations: readonly AclOperation[], why: string): void {
    for (const operation of operations) {
      const key = [principal, resourceType, patternType, resourceName, operation].join('\u0000');
      const found = this.entries.get(key);
      if (found) {
        if (!found.whys.includes(why)) found.whys.push(why);
        found.components.add(component);
        continue;
      }
      const entry: AclEntry = { principal, resourceType, resourceName, patternType, operation, permission: 'ALLOW', host: '*', why, components: [component] };
      this.entries.set(key, { entry, whys: [why], components: new Set([component]) });
    }
  }

  topics(component: AclComponent, principal: string, set: TopicSet, operations: readonly AclOperation[], why: string): void {
    for (const r of set.resources) this.add(component, principal, 'TOPIC', r.name, r.patternType, operations, why);
  }

  build(): AclPlan {
    const implying = new Set(['Read', 'Write', 'Delete']);
    const resource = (e: AclEntry) => [e.principal, e.resourceType, e.patternType, e.resourceName].join('\u0000');
    const described = new Set([...this.entries.values()].filter(({ entry }) => implying.has(entry.operation)).map(({ entry }) => resource(entry)));
    return [...this.entries.values()]
      // Describe beside Read, Write or Delete on the same resource: implied by them, so left out.
      .filter(({ entry }) => !(entry.operation === 'Describe' && entry.resourceType !== 'TRANSACTIONAL_ID' && described.has(resource(entry))))
      .map(({ entry, whys, components }) => Object.freeze({ ...entry, why: whys.join('; '), components: Object.freeze([...components]) }));
  }
}

/** The Debezium heartbeat topic: `topic.heartbeat.prefix` (default `__debezium-heartbeat`) + `.` + topic.prefix. */
export function heartbeatTopic(config: OutboxConfig): string {
  return `__debezium-heartbeat.${config.connector.topicPrefix}`;
}

/** The consumer group of the configured router: router.groupId, else its consumer name (as createRouter resolves it). */
export function routerGroupId(config: OutboxConfig): string {
  return config.router.groupId ?? consumerName(config, config.router.consumer);
}

/**
 * The ACLs of each part of the pipeline for this config. Throws ACL_TOPICS_UNDERIVABLE when the routed
 * or dead-letter topics cannot be named by an ACL (see topicSet), CONSUMER_NAME_REQUIRED when the
 * router's group cannot be known (another database than the local stack, no router.consumer).
 */
export function planKafkaAcls(config: OutboxConfig, options: PlanOptions = {}): AclReport {
  const wanted = new Set<AclComponent>(options.components?.length ? options.components : ACL_COMPONENTS);
  const { acls, connector } = config;
  const names = topicNames(connector.topicReplacement);
  const dlqTemplate = names.dlqReplacement;
  const routed = topicSet(connector.topicReplacement, names.routed, acls.aggregateTypes, 'routed topics');
  const dlq = topicSet(dlqTemplate, (t) => names.dlqFor(names.routed(t), t), acls.aggregateTypes, 'dead-letter topics');
  const warnings: string[] = [];
  const b = new PlanBuilder();
  const connectorPrincipal = acls.connectorPrincipal ?? acls.connectPrincipal;
  const eos = connector.exactlyOnce;

  if (wanted.has('connect')) {
    const p = acls.connectPrincipal;
    b.add('connect', p, 'GROUP', acls.connectGroupId, 'LITERAL', ['Read'], 'Connect worker: joins its cluster\'s group (group.id) to share connectors and tasks');
    const internal: Array<[string, string]> = [
      [acls.connectConfigTopic, 'config.storage.topic: connector and task configs'],
      [acls.connectOffsetTopic, 'offset.storage.topic: the connector\'s source offsets (Debezium\'s LSN)'],
      [acls.connectStatusTopic, 'status.storage.topic: connector and task states'],
    ];
    for (const [topic, what] of internal) {
      b.add('connect', p, 'TOPIC', topic, 'LITERAL', ['Read', 'Write'], `Connect worker: reads and writes its ${what}`);
      b.add('connect', p, 'TOPIC', topic, 'LITERAL', ['Create'], `Connect worker: creates its ${what.split(':')[0]} at first start (drop this ACL once the topic exists)`);
    }
    if (eos) {
      b.add('connect', p, 'TRANSACTIONAL_ID', `connect-cluster-${acls.connectGroupId}`, 'LITERAL', ['Write', 'Describe'], 'Connect worker with exactly.once.source.support=enabled (connector.exactlyOnce): the leader writes task configs to the config topic in transactions');
      if (acls.idempotentWriteAcl) b.add('connect', p, 'CLUSTER', CLUSTER_RESOURCE_NAME, 'LITERAL', ['IdempotentWrite'], 'Connect worker\'s transactional producer on brokers before Kafka 2.8 (acls.idempotentWriteAcl)');
    }
  }

  if (wanted.has('connector')) {
    const p = connectorPrincipal;
    b.topics('connector', p, routed, ['Write'], `connector ${connector.name}: the Outbox Event Router publishes each event to its routed topic (connector.topicReplacement)`);
    b.topics('connector', p, routed, ['Create'], `connector ${connector.name}: Connect creates a routed topic on its first event (topic.creation.default.* in connect/outbox-connector.json)`);
    if (connector.heartbeatIntervalMs > 0) {
      const hb = heartbeatTopic(config);
      b.add('connector', p, 'TOPIC', hb, 'LITERAL', ['Write', 'Create'], `connector ${connector.name}: Debezium's heartbeat records (connector.heartbeatIntervalMs > 0) go to ${hb}, created on first use`);
    }
    if (eos) {
      // tasks.max is 1 (connect/outbox-connector.json; Debezium's PostgreSQL connector runs one task), so the one id is task 0's.
      const txId = `${acls.connectGroupId}-${connector.name}-0`;
      b.add('connector', p, 'TRANSACTIONAL_ID', txId, 'LITERAL', ['Write', 'Describe'], `connector ${connector.name} with connector.exactlyOnce: its task's transactional producer (\${groupId}-\${connector}-\${taskId}, KIP-618), and the fencing of its zombies`);
      b.add('connector', p, 'TOPIC', acls.connectOffsetTopic, 'LITERAL', ['Write'], `connector ${connector.name} with connector.exactlyOnce: its task's producer writes the source offsets into the offsets topic in the same transaction as the events`);
      if (acls.idempotentWriteAcl) b.add('connector', p, 'CLUSTER', CLUSTER_RESOURCE_NAME, 'LITERAL', ['IdempotentWrite'], `connector ${connector.name}'s transactional producer on brokers before Kafka 2.8 (acls.idempotentWriteAcl)`);
    }
  }

  const replayAcls = (component: AclComponent, p: string, who: string) => {
    b.topics(component, p, dlq, ['Read'], `${who}: reads the dead-letter topic to replay (src/router/replay.ts, dlq-read.ts)`);
    b.add(component, p, 'GROUP', REPLAY_GROUP_PREFIX, 'PREFIXED', ['Read'], `${who}: each replay reads with a throw-away group ${REPLAY_GROUP_PREFIX}<uuid>`);
    b.add(component, p, 'GROUP', REPLAY_GROUP_PREFIX, 'PREFIXED', ['Delete'], `${who}: and deletes that group when the read ends`);
    b.topics(component, p, routed, ['Write'], `${who}: sends each replayed event back to its routed topic, where the router applies it again`);
  };

  if (wanted.has('router')) {
    const p = acls.routerPrincipal;
    const group = routerGroupId(config);
    b.add('router', p, 'GROUP', group, 'LITERAL', ['Read'], `router: joins its consumer group ${group} (router.groupId, else router.consumer) and commits its offsets`);
    b.topics('router', p, routed, ['Read'], 'router: consumes the routed topics (with read_committed)');
    b.topics('router', p, routed, ['DescribeConfigs'], 'router: checks the routed topics\' retention.ms, segment.ms and cleanup.policy against router.inboxRetentionMs at start (src/router/inbox-retention.ts); also outbox inbox:prune');
    b.topics('router', p, dlq, ['Write'], 'router: dead-letters a record that still fails after router.maxAttempts (src/router/dead-letter.ts)');
    b.topics('router', p, dlq, ['Create'], 'router: creates each dead-letter topic before its first dead letter, with the source\'s partitions (src/router/dlq-topics.ts)');
    if (config.router.topics !== undefined) {
      warnings.push(
        `router.topics (${config.router.topics}) is a regular expression; the router's Read ACLs cover the routed topics (${describeSet(routed)}) only. A topic it matches outside them is not readable.`,
      );
    }
  }

  if (wanted.has('dlq-replay')) replayAcls('dlq-replay', acls.replayPrincipal, 'dlq:replay');

  if (wanted.has('relay')) {
    const p = acls.relayPrincipal;
    b.topics('relay', p, routed, ['Write'], 'relay: publishes each outbox row to its routed topic (src/relay/publish.ts); not idempotent, so no IdempotentWrite');
    b.topics('relay', p, routed, ['Create'], 'relay: creates a missing routed topic with relay.topicPartitions and relay.topicReplicationFactor (src/relay/sender.ts)');
  }

  /** What collectStatus reads (src/status/sections.ts); `deployCheck`: also connector:deploy's topic check, run with this principal. */
  const statusAcls = (component: AclComponent, p: string, who: string, deployCheck: boolean) => {
    const group = routerGroupIdOrUndefined(config);
    b.topics(component, p, routed, ['Describe'], `${who}: lists the routed topics and their end offsets for the consumer lag`);
    if (deployCheck) b.topics(component, p, routed, ['DescribeConfigs'], `${who}: connector:deploy's topic check reads the routed topics' cleanup.policy (src/connector/topic-guard.ts)`);
    b.topics(component, p, dlq, ['Describe'], `${who}: lists the dead-letter topics and their depth`);
    b.topics(component, p, dlq, ['DescribeConfigs'], `${who}: reads the dead-letter topics' retention.ms${deployCheck ? ' (and cleanup.policy for connector:deploy)' : ''}`);
    if (group !== undefined) b.add(component, p, 'GROUP', group, 'LITERAL', ['Describe'], `${who}: reads the committed offsets and members of the router's group ${group}`);
  };

  if (wanted.has('status')) statusAcls('status', acls.statusPrincipal, 'status', true);

  if (wanted.has('console')) {
    const p = acls.consolePrincipal;
    statusAcls('console', p, 'console (its status sampling)', false);
    b.topics('console', p, dlq, ['Read'], 'console: keeps the newest dead letters of each dead-letter topic in memory (src/console/dlq-cache.ts)');
    b.add('console', p, 'GROUP', CONSOLE_GROUP_PREFIX, 'PREFIXED', ['Read'], `console: reads them with a group of its own, ${CONSOLE_GROUP_PREFIX}<uuid>`);
    if (!config.console.readOnly) replayAcls('console', p, 'console\'s replay action (console.readOnly=false)');
  }

  overlapWarnings(routed, dlq, warnings);
  const plan = b.build();
  const principals: Array<{ principal: string; components: AclComponent[] }> = [];
  for (const e of plan) {
    let row = principals.find((r) => r.principal === e.principal);
    if (!row) principals.push((row = { principal: e.principal, components: [] }));
    for (const c of e.components) if (!row.components.includes(c)) row.components.push(c);
  }
  return Object.freeze({ principals, plan, warnings });
}

/** The router's group when it is known; `outbox status` reads no group otherwise, and neither grant is needed. */
function routerGroupIdOrUndefined(config: OutboxConfig): string | undefined {
  try {
    return routerGroupId(config);
  } catch {
    return undefined;
  }
}

function describeSet(set: TopicSet): string {
  return set.resources.map((r) => (r.patternType === 'PREFIXED' ? `${r.name}*` : r.name)).join(', ');
}

/** A routed prefix that is also a prefix of the dead-letter topics (`outbox.${routedByValue}`) lets readers of one read the other. */
function overlapWarnings(routed: TopicSet, dlq: TopicSet, warnings: string[]): void {
  for (const r of routed.resources) {
    if (r.patternType !== 'PREFIXED') continue;
    const covered = dlq.resources.filter((d) => d.name.startsWith(r.name));
    if (covered.length === 0) continue;
    warnings.push(
      `The routed topics' prefix ${r.name} also covers the dead-letter topics (${describeSet({ what: '', resources: covered })}): the router's Read and the connector's and relay's Write reach them too. ` +
        'Set acls.aggregateTypes for LITERAL topic ACLs, or choose a replacement whose prefix the dead-letter topics do not share (the default outbox.event.${routedByValue}).',
    );
  }
}
