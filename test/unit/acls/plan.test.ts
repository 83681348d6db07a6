import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONSOLE_GROUP_PREFIX, planKafkaAcls, REPLAY_GROUP_PREFIX, type AclEntry, type AclReport } from '../../../src/acls';
import { loadConfig, type OutboxOptions } from '../../../src/config';
import { thrown } from '../../support/expect-error';

const config = (overrides: OutboxOptions = {}, env: Record<string, string> = {}) => loadConfig({ env, overrides });

/** One ACL as a line: principal, operation, type:pattern:name. */
const line = (e: AclEntry) => `${e.principal} ${e.operation} ${e.resourceType}:${e.patternType}:${e.resourceName}`;
const lines = (r: AclReport) => r.plan.map(line).sort();
const of = (r: AclReport, principal: string) => r.plan.filter((e) => e.principal === principal).map(line).sort();

describe('planKafkaAcls', () => {
  it('the default config: exactly these ACLs, each with a reason', () => {
    const report = planKafkaAcls(config());
    expect(lines(report)).toEqual(
      [
        'User:outbox-connect Read GROUP:LITERAL:outbox-connect',
        'User:outbox-connect Read TOPIC:LITERAL:_connect-configs',
        'User:outbox-connect Write TOPIC:LITERAL:_connect-configs',
        'User:outbox-connect Create TOPIC:LITERAL:_connect-configs',
        'User:outbox-connect Read TOPIC:LITERAL:_connect-offsets',
        'User:outbox-connect Write TOPIC:LITERAL:_connect-offsets',
        'User:outbox-connect Create TOPIC:LITERAL:_connect-offsets',
        'User:outbox-connect Read TOPIC:LITERAL:_connect-status',
        'User:outbox-connect Write TOPIC:LITERAL:_connect-status',
        'User:outbox-connect Create TOPIC:LITERAL:_connect-status',
        'User:outbox-connect Write TOPIC:PREFIXED:outbox.event.',
        'User:outbox-connect Create TOPIC:PREFIXED:outbox.event.',
        'User:outbox-connect Write TOPIC:LITERAL:__debezium-heartbeat.outbox',
        'User:outbox-connect Create TOPIC:LITERAL:__debezium-heartbeat.outbox',
        'User:outbox-router Read GROUP:LITERAL:outbox-router',
        'User:outbox-router Read TOPIC:PREFIXED:outbox.event.',
        'User:outbox-router DescribeConfigs TOPIC:PREFIXED:outbox.event.',
        'User:outbox-router Write TOPIC:PREFIXED:outbox.dlq.',
        'User:outbox-router Create TOPIC:PREFIXED:outbox.dlq.',
        'User:outbox-dlq-replay Read TOPIC:PREFIXED:outbox.dlq.',
        'User:outbox-dlq-replay Read GROUP:PREFIXED:outbox-dlq-replay-',
        'User:outbox-dlq-replay Delete GROUP:PREFIXED:outbox-dlq-replay-',
        'User:outbox-dlq-replay Write TOPIC:PREFIXED:outbox.event.',
        'User:outbox-relay Write TOPIC:PREFIXED:outbox.event.',
        'User:outbox-relay Create TOPIC:PREFIXED:outbox.event.',
        'User:outbox-status Describe TOPIC:PREFIXED:outbox.event.',
        'User:outbox-status DescribeConfigs TOPIC:PREFIXED:outbox.event.',
        'User:outbox-status Describe TOPIC:PREFIXED:outbox.dlq.',
        'User:outbox-status DescribeConfigs TOPIC:PREFIXED:outbox.dlq.',
        'User:outbox-status Describe GROUP:LITERAL:outbox-router',
        // The console: status sampling, its dead-letter reader, the replay action. Describe on the topics
        // it reads or writes is implied by Read/Write, so not granted again.
        'User:outbox-console DescribeConfigs TOPIC:PREFIXED:outbox.dlq.',
        'User:outbox-console Describe GROUP:LITERAL:outbox-router',
        'User:outbox-console Read TOPIC:PREFIXED:outbox.dlq.',
        'User:outbox-console Read GROUP:PREFIXED:outbox-console-',
        'User:outbox-console Read GROUP:PREFIXED:outbox-dlq-replay-',
        'User:outbox-console Delete GROUP:PREFIXED:outbox-dlq-replay-',
        'User:outbox-console Write TOPIC:PREFIXED:outbox.event.',
      ].sort(),
    );
    for (const e of report.plan) {
      expect(e).toMatchObject({ permission: 'ALLOW', host: '*' });
      expect(e.why.length).toBeGreaterThan(20);
    }
    expect(report.warnings).toEqual([]);
    expect(report.principals.map((p) => p.principal)).toEqual(['User:outbox-connect', 'User:outbox-router', 'User:outbox-dlq-replay', 'User:outbox-relay', 'User:outbox-status', 'User:outbox-console']);
    expect(report.principals[0]?.components).toEqual(['connect', 'connector']);
    // Least privilege: nobody but the writers writes the routed topics, nobody but the router writes the DLQs.
    const writers = (prefix: string) => [...new Set(report.plan.filter((e) => e.operation === 'Write' && e.resourceName === prefix).map((e) => e.principal))].sort();
    expect(writers('outbox.event.')).toEqual(['User:outbox-connect', 'User:outbox-console', 'User:outbox-dlq-replay', 'User:outbox-relay']);
    expect(writers('outbox.dlq.')).toEqual(['User:outbox-router']);
    expect(report.plan.filter((e) => e.principal === 'User:outbox-status').map((e) => e.operation).every((op) => op.startsWith('Describe'))).toBe(true);
  });

  it('connector.exactlyOnce: the worker\'s and the task\'s transactional ids (KIP-618), no IdempotentWrite unless asked', () => {
    const base = new Set(lines(planKafkaAcls(config())));
    const eos = planKafkaAcls(config({ connector: { exactlyOnce: true } }));
    expect(lines(eos).filter((l) => !base.has(l))).toEqual(
      [
        'User:outbox-connect Write TRANSACTIONAL_ID:LITERAL:connect-cluster-outbox-connect',
        'User:outbox-connect Describe TRANSACTIONAL_ID:LITERAL:connect-cluster-outbox-connect',
        'User:outbox-connect Write TRANSACTIONAL_ID:LITERAL:outbox-connect-outbox-connector-0',
        'User:outbox-connect Describe TRANSACTIONAL_ID:LITERAL:outbox-connect-outbox-connector-0',
      ].sort(),
    );
    // The offsets topic's Write, asked for by the worker and the task's producer, is one entry with both reasons.
    const offsets = eos.plan.find((e) => e.operation === 'Write' && e.resourceName === '_connect-offsets');
    expect(offsets?.components).toEqual(['connect', 'connector']);
    expect(offsets?.why).toMatch(/reads and writes .*; .*same transaction/);

    const legacy = planKafkaAcls(config({ connector: { exactlyOnce: true, name: 'orders-cdc' }, acls: { idempotentWriteAcl: true, connectGroupId: 'prod-connect' } }));
    expect(lines(legacy)).toEqual(expect.arrayContaining(['User:outbox-connect IdempotentWrite CLUSTER:LITERAL:kafka-cluster', 'User:outbox-connect Write TRANSACTIONAL_ID:LITERAL:prod-connect-orders-cdc-0']));
    expect(lines(planKafkaAcls(config({ acls: { idempotentWriteAcl: true } }))).some((l) => l.includes('IdempotentWrite'))).toBe(false);
  });

  it('a connector principal of its own gets the connector\'s ACLs, the offsets topic\'s Write with exactly-once', () => {
    const r = planKafkaAcls(config({ connector: { exactlyOnce: true }, acls: { connectorPrincipal: 'User:orders-cdc' } }), { components: ['connect', 'connector'] });
    expect(of(r, 'User:orders-cdc')).toEqual(
      [
        'User:orders-cdc Write TOPIC:PREFIXED:outbox.event.',
        'User:orders-cdc Create TOPIC:PREFIXED:outbox.event.',
        'User:orders-cdc Write TOPIC:LITERAL:__debezium-heartbeat.outbox',
        'User:orders-cdc Create TOPIC:LITERAL:__debezium-heartbeat.outbox',
        'User:orders-cdc Write TRANSACTIONAL_ID:LITERAL:outbox-connect-outbox-connector-0',
        'User:orders-cdc Describe TRANSACTIONAL_ID:LITERAL:outbox-connect-outbox-connector-0',
        'User:orders-cdc Write TOPIC:LITERAL:_connect-offsets',
      ].sort(),
    );
    expect(of(r, 'User:outbox-connect').some((l) => l.includes('outbox.event.'))).toBe(false);
  });

  it('a topicReplacement with a fixed prefix: PREFIXED ACLs on it and on its dead-letter twin', () => {
    const r = planKafkaAcls(config({ connector: { topicReplacement: 'staging.outbox.event.${routedByValue}', topicPrefix: 'staging' } }));
    const topics = [...new Set(r.plan.filter((e) => e.resourceType === 'TOPIC' && e.patternType === 'PREFIXED').map((e) => e.resourceName))].sort();
    expect(topics).toEqual(['staging.outbox.dlq.', 'staging.outbox.event.']);
    expect(lines(r)).toContain('User:outbox-connect Write TOPIC:LITERAL:__debezium-heartbeat.staging');
    expect(r.warnings).toEqual([]);
  });

  it('a topicReplacement without a fixed prefix: refused, unless the aggregate types are listed (then LITERAL)', () => {
    const replacement = { connector: { topicReplacement: '${routedByValue}.events' } };
    const e = thrown(() => planKafkaAcls(config(replacement)));
    expect(e.code).toBe('ACL_TOPICS_UNDERIVABLE');
    expect(e.message).toContain('"${routedByValue}.events"');
    expect(e.message).toContain('acls.aggregateTypes');

    const r = planKafkaAcls(config({ ...replacement, acls: { aggregateTypes: ['payment', 'order'] } }), { components: ['router'] });
    expect(lines(r)).toEqual(
      [
        'User:outbox-router Read GROUP:LITERAL:outbox-router',
        'User:outbox-router Read TOPIC:LITERAL:order.events',
        'User:outbox-router Read TOPIC:LITERAL:payment.events',
        'User:outbox-router DescribeConfigs TOPIC:LITERAL:order.events',
        'User:outbox-router DescribeConfigs TOPIC:LITERAL:payment.events',
        // The dead-letter name of a topic outside the outbox.event. convention (src/topics).
        'User:outbox-router Write TOPIC:LITERAL:outbox.dlq.order',
        'User:outbox-router Write TOPIC:LITERAL:outbox.dlq.payment',
        'User:outbox-router Create TOPIC:LITERAL:outbox.dlq.order',
        'User:outbox-router Create TOPIC:LITERAL:outbox.dlq.payment',
      ].sort(),
    );
    // From the environment, as every setting.
    const fromEnv = planKafkaAcls(config(replacement, { OUTBOX_ACLS_AGGREGATE_TYPES: 'order' }), { components: ['relay'] });
    expect(lines(fromEnv)).toEqual(['User:outbox-relay Create TOPIC:LITERAL:order.events', 'User:outbox-relay Write TOPIC:LITERAL:order.events']);
  });

  it('says so when the routed prefix also covers the dead-letter topics', () => {
    const r = planKafkaAcls(config({ connector: { topicReplacement: 'outbox.${routedByValue}' } }), { components: ['router'] });
    expect(lines(r)).toContain('User:outbox-router Read TOPIC:PREFIXED:outbox.');
    expect(r.warnings).toHaveLength(1);
    expect(r.warnings[0]).toContain('outbox. also covers the dead-letter topics (outbox.dlq.*)');
  });

  it('the router\'s group: router.groupId, else router.consumer; required off the local stack', () => {
    const group = (o: OutboxOptions) => planKafkaAcls(config(o), { components: ['router'] }).plan.filter((e) => e.resourceType === 'GROUP').map((e) => e.resourceName);
    expect(group({ router: { consumer: 'billing' } })).toEqual(['billing']);
    expect(group({ router: { consumer: 'billing', groupId: 'billing-v2', allowGroupIdMismatch: true } })).toEqual(['billing-v2']);
    const remote = { database: { host: 'db.example.internal' } };
    expect(thrown(() => planKafkaAcls(config(remote), { components: ['router'] })).code).toBe('CONSUMER_NAME_REQUIRED');
    // status without a known group reads none, so it gets no group ACL rather than an error.
    const status = planKafkaAcls(config(remote), { components: ['status'] });
    expect(status.plan.some((e) => e.resourceType === 'GROUP')).toBe(false);
    expect(status.plan.length).toBe(4);
  });

  it('principals and Connect names come from the acls settings (file or environment)', () => {
    const r = planKafkaAcls(
      config({ acls: { routerPrincipal: 'User:billing-router', connectGroupId: 'connect-prod', connectConfigTopic: 'connect-prod-configs' } }, { OUTBOX_ACLS_RELAY_PRINCIPAL: 'User:relay-prod' }),
      { components: ['connect', 'router', 'relay'] },
    );
    expect(r.principals.map((p) => p.principal)).toEqual(['User:outbox-connect', 'User:billing-router', 'User:relay-prod']);
    expect(lines(r)).toEqual(expect.arrayContaining(['User:outbox-connect Read GROUP:LITERAL:connect-prod', 'User:outbox-connect Write TOPIC:LITERAL:connect-prod-configs']));
    expect(() => config({ acls: { routerPrincipal: 'outbox-router' } })).toThrow(/acls\.routerPrincipal/);
  });

  it('heartbeats off: no heartbeat topic; a read-only console: no replay rights', () => {
    const r = planKafkaAcls(config({ connector: { heartbeatIntervalMs: 0 }, console: { readOnly: true } }), { components: ['connector', 'console'] });
    expect(r.plan.some((e) => e.resourceName.startsWith('__debezium-heartbeat'))).toBe(false);
    const consoleOps = of(r, 'User:outbox-console');
    expect(consoleOps.some((l) => l.includes(REPLAY_GROUP_PREFIX) || l.includes(' Write '))).toBe(false);
    expect(consoleOps).toContain(`User:outbox-console Read GROUP:PREFIXED:${CONSOLE_GROUP_PREFIX}`);
    expect(consoleOps).toContain('User:outbox-console Describe TOPIC:PREFIXED:outbox.event.');
  });

  it('the throw-away group prefixes are the ones the readers use', () => {
    const src = (path: string) => readFileSync(join(__dirname, '../../../src', path), 'utf8');
    expect(src('router/dlq-read.ts')).toContain(`\`${REPLAY_GROUP_PREFIX}\${randomUUID()}\``);
    expect(src('console/dlq-cache.ts')).toContain(`\`${CONSOLE_GROUP_PREFIX}\${randomUUID()}\``);
  });
});
