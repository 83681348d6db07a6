/**
 * scripts/stack/cluster-configs.ts and the cluster profile's templates in connect/: three KRaft nodes and
 * two Connect workers, which differ from the single node's and worker's settings only where they must.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { CLUSTER_TEMPLATES, clusterTemplateValues, renderClusterConfigs } from '../../../scripts/stack/cluster-configs';
import { PROJECT_ROOT, stackPaths } from '../../../scripts/stack/paths';
import { CLUSTER, CLUSTER_BROKERS, KAFKA } from '../../../scripts/stack/settings';
import { jvmTemplateValues } from '../../../scripts/stack/stack';
import { parseProperties, renderTemplateFile } from '../../../scripts/stack/template';

const paths = stackPaths('/tmp/outbox-cluster-test/state', '/tmp/outbox-cluster-test/cache');
const values = clusterTemplateValues(paths, { exactlyOnceSource: 'disabled' });
const render = (template: string, v: Record<string, string | number>) => renderTemplateFile(join(PROJECT_ROOT, 'connect', template), v);
const node = (name: string) => parseProperties(render(CLUSTER_TEMPLATES.kafka, values[name] ?? {}));
const worker = (name: string) => parseProperties(render(CLUSTER_TEMPLATES.connect, values[name] ?? {}));
const single = (template: string) => parseProperties(render(template, jvmTemplateValues(paths)));

/** Keys whose values differ between a and b, and keys only one of them has. */
function differences(a: Record<string, string>, b: Record<string, string>): { changed: string[]; added: string[]; removed: string[] } {
  return {
    changed: Object.keys(a).filter((k) => k in b && a[k] !== b[k]).sort(),
    added: Object.keys(b).filter((k) => !(k in a)).sort(),
    removed: Object.keys(a).filter((k) => !(k in b)).sort(),
  };
}

describe('the cluster profile\'s brokers', () => {
  const names = CLUSTER.kafkaNodes.map((n) => n.name);

  it.each(names)('%s renders with no placeholder left in any setting', (name) => {
    const text = render(CLUSTER_TEMPLATES.kafka, values[name] ?? {});
    expect(text.match(/\$\{[A-Za-z_][A-Za-z0-9_.]*\}/g) ?? []).toEqual([]);
  });

  it('are nodes 1, 2, 3, each a combined broker and controller on its own two ports and log.dirs', () => {
    const props = names.map(node);
    expect(props.map((p) => p['node.id'])).toEqual(['1', '2', '3']);
    expect(props.map((p) => p['process.roles'])).toEqual(names.map(() => 'broker,controller'));
    expect(props.map((p) => p['listeners'])).toEqual([
      'PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093',
      'PLAINTEXT://127.0.0.1:9192,CONTROLLER://127.0.0.1:9193',
      'PLAINTEXT://127.0.0.1:9292,CONTROLLER://127.0.0.1:9293',
    ]);
    expect(props.map((p) => p['advertised.listeners'])).toEqual(CLUSTER_BROKERS.map((b) => `PLAINTEXT://${b}`));
    const dirs = props.map((p) => p['log.dirs'] ?? '');
    expect(new Set(dirs).size).toBe(3);
    for (const dir of dirs) expect(isAbsolute(dir) && dir !== paths.kafkaDataDir).toBe(true);
  });

  it('share one static quorum of the three voters', () => {
    for (const name of names) expect(node(name)['controller.quorum.voters']).toBe('1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293');
  });

  it('replicate every topic, the internal ones included, three times with two in sync required and no unclean election', () => {
    expect(node('kafka-2')).toMatchObject({
      'default.replication.factor': '3',
      'min.insync.replicas': '2',
      'unclean.leader.election.enable': 'false',
      'offsets.topic.replication.factor': '3',
      'transaction.state.log.replication.factor': '3',
      'transaction.state.log.min.isr': '2',
      'share.coordinator.state.topic.replication.factor': '3',
      'share.coordinator.state.topic.min.isr': '2',
    });
  });

  it('keep every other setting of the single node (its 2-core threads and partitions included)', () => {
    expect(differences(single('kafka-server.properties'), node('kafka-1'))).toEqual({
      // kafka-1 keeps 9092/9093, so its listeners equal the single node's.
      changed: ['controller.quorum.voters', 'log.dirs', 'offsets.topic.replication.factor', 'share.coordinator.state.topic.min.isr',
        'share.coordinator.state.topic.replication.factor', 'transaction.state.log.min.isr', 'transaction.state.log.replication.factor'],
      added: ['default.replication.factor', 'min.insync.replicas', 'unclean.leader.election.enable'],
      removed: [],
    });
  });
});

describe('the cluster profile\'s Connect workers', () => {
  const names = CLUSTER.connectWorkers.map((w) => w.name);

  it('join one group on the same storage topics, each with its own REST port, bootstrapping from every broker', () => {
    const props = names.map(worker);
    expect(props.map((p) => p['group.id'])).toEqual([KAFKA.connectGroupId, KAFKA.connectGroupId]);
    expect(props.map((p) => p['listeners'])).toEqual(['http://127.0.0.1:8083', 'http://127.0.0.1:8084']);
    expect(props.map((p) => p['rest.advertised.port'])).toEqual(['8083', '8084']);
    for (const p of props) {
      expect(p['bootstrap.servers']).toBe('127.0.0.1:9092,127.0.0.1:9192,127.0.0.1:9292');
      expect(p['plugin.path']).toBe(paths.pluginPath);
      for (const store of ['config', 'offset', 'status']) expect(p[`${store}.storage.replication.factor`]).toBe('3');
    }
  });

  it('wait CLUSTER.scheduledRebalanceMaxDelayMs for a departed worker unless told otherwise, and pass exactly-once through', () => {
    expect(worker('connect-2')['scheduled.rebalance.max.delay.ms']).toBe(String(CLUSTER.scheduledRebalanceMaxDelayMs));
    const other = clusterTemplateValues(paths, { exactlyOnceSource: 'enabled', rebalanceDelayMs: 300_000 })['connect-1'] ?? {};
    expect(parseProperties(render(CLUSTER_TEMPLATES.connect, other))).toMatchObject({ 'scheduled.rebalance.max.delay.ms': '300000', 'exactly.once.source.support': 'enabled' });
  });

  it('keep every other setting of the single worker', () => {
    expect(differences(single('connect-distributed.properties'), worker('connect-2'))).toEqual({
      changed: ['bootstrap.servers', 'config.storage.replication.factor', 'listeners', 'offset.storage.replication.factor', 'rest.advertised.port',
        'scheduled.rebalance.max.delay.ms', 'status.storage.replication.factor'],
      added: [],
      removed: [],
    });
  });
});

it('renderClusterConfigs writes one properties file per node into the config folder', () => {
  const dir = mkdtempSync(join(tmpdir(), 'outbox-cluster-'));
  try {
    const tmp = stackPaths(join(dir, 'state'), join(dir, 'cache'));
    renderClusterConfigs(tmp, { exactlyOnceSource: 'disabled' });
    expect(readdirSync(tmp.configDir).sort()).toEqual(['connect-1.properties', 'connect-2.properties', 'kafka-1.properties', 'kafka-2.properties', 'kafka-3.properties']);
    expect(parseProperties(readFileSync(join(tmp.configDir, 'kafka-3.properties'), 'utf8'))['node.id']).toBe('3');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
