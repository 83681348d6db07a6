import { Command } from 'commander';
import { parseAllDocuments } from 'yaml';
import {
  ACL_OPERATIONS,
  planKafkaAcls,
  renderAclsJson,
  renderKafkaAcls,
  renderStrimziUsers,
  shellWord,
  strimziUserName,
  type AclEntry,
  type AclReport,
} from '../../../src/acls';
import { kafkaAclsCommand } from '../../../src/cli/acls-command';
import { loadConfig, type OutboxOptions } from '../../../src/config';
import { thrown } from '../../support/expect-error';

// Distinctive secrets wherever the config holds one: none may reach any output.
const SECRETS = ['pg-admin-S3cret', 'sasl-S3cret-pass', 'tls-key-S3cret', 'registry-S3cret', 'connect-S3cret', 'router-role-S3cret'];
const SECRET_ENV = {
  PGPASSWORD: SECRETS[0] as string,
  OUTBOX_KAFKA_SASL_MECHANISM: 'scram-sha-512',
  OUTBOX_KAFKA_SASL_USERNAME: 'outbox-admin',
  OUTBOX_KAFKA_SASL_PASSWORD: SECRETS[1] as string,
  OUTBOX_KAFKA_SSL_KEY_PASSWORD: SECRETS[2] as string,
  OUTBOX_REGISTRY_PASSWORD: SECRETS[3] as string,
  OUTBOX_CONNECT_PASSWORD: SECRETS[4] as string,
  OUTBOX_ROUTER_PASSWORD: SECRETS[5] as string,
};
const config = (overrides: OutboxOptions = {}) => loadConfig({ env: SECRET_ENV, overrides });

const key = (e: Pick<AclEntry, 'principal' | 'resourceType' | 'resourceName' | 'patternType' | 'operation'>) =>
  [e.principal, e.operation, e.resourceType, e.patternType, e.resourceName].join(' ');
const keys = (r: AclReport) => r.plan.map(key).sort();

/** Reads kafka-acls.sh lines back into ACLs: what the broker would be told, flag by flag. */
function parseKafkaAcls(text: string): Array<Parameters<typeof key>[0] & { host: string; bootstrap: string; commandConfig: string }> {
  const types: Record<string, string> = { '--topic': 'TOPIC', '--group': 'GROUP', '--cluster': 'CLUSTER', '--transactional-id': 'TRANSACTIONAL_ID' };
  return text
    .split('\n')
    .filter((l) => l.startsWith('kafka-acls.sh '))
    .map((l) => {
      // Words as a POSIX shell splits them: bare, or single-quoted ('\'' for a quote).
      const words = [...l.matchAll(/'((?:[^']|'\\'')*)'|(\S+)/g)].map((m) => (m[1] !== undefined ? m[1].replace(/'\\''/g, "'") : (m[2] as string)));
      const flag = (name: string) => {
        const at = words.indexOf(name);
        return at < 0 ? undefined : words[at + 1];
      };
      expect(words.filter((w) => w === '--add')).toHaveLength(1);
      expect(words.filter((w) => w === '--operation')).toHaveLength(1);
      const typeFlag = Object.keys(types).filter((f) => words.includes(f));
      expect(typeFlag).toHaveLength(1);
      const resourceType = types[typeFlag[0] as string] as AclEntry['resourceType'];
      return {
        principal: flag('--allow-principal') as string,
        operation: flag('--operation') as AclEntry['operation'],
        resourceType,
        resourceName: resourceType === 'CLUSTER' ? 'kafka-cluster' : (flag(typeFlag[0] as string) as string),
        patternType: (flag('--resource-pattern-type') as string).toUpperCase() as AclEntry['patternType'],
        host: flag('--allow-host') as string,
        bootstrap: flag('--bootstrap-server') as string,
        commandConfig: flag('--command-config') as string,
      };
    });
}

interface StrimziRule {
  resource: { type: string; name?: string; patternType?: string };
  operations: AclEntry['operation'][];
  host: string;
}
interface KafkaUser {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels: Record<string, string> };
  spec: { authentication: { type: string }; authorization: { type: string; acls: StrimziRule[] } };
}

/** The Strimzi KafkaUser resources back into ACLs, checking each against the AclRule schema as it goes. */
function parseStrimzi(text: string): Array<Parameters<typeof key>[0]> {
  const docs = parseAllDocuments(text).map((d) => d.toJS() as KafkaUser | null).filter((d): d is KafkaUser => d !== null);
  const out: Array<Parameters<typeof key>[0]> = [];
  for (const doc of docs) {
    expect(doc).toMatchObject({ apiVersion: 'kafka.strimzi.io/v1beta2', kind: 'KafkaUser', metadata: { labels: { 'strimzi.io/cluster': 'prod-kafka' } } });
    expect(doc.spec.authentication).toEqual({ type: 'scram-sha-512' });
    expect(doc.spec.authorization.type).toBe('simple');
    expect(Object.keys(doc.spec)).toEqual(['authentication', 'authorization']);
    for (const rule of doc.spec.authorization.acls) {
      expect(Object.keys(rule).sort()).toEqual(['host', 'operations', 'resource']);
      expect(['topic', 'group', 'cluster', 'transactionalId']).toContain(rule.resource.type);
      if (rule.resource.type === 'cluster') expect(rule.resource).toEqual({ type: 'cluster' });
      else expect(['literal', 'prefix']).toContain(rule.resource.patternType);
      for (const operation of rule.operations) {
        expect(ACL_OPERATIONS).toContain(operation);
        out.push({
          principal: `User:${doc.metadata.name}`,
          operation,
          resourceType: ({ topic: 'TOPIC', group: 'GROUP', cluster: 'CLUSTER', transactionalId: 'TRANSACTIONAL_ID' } as const)[rule.resource.type as 'topic' | 'group' | 'cluster' | 'transactionalId'],
          resourceName: rule.resource.name ?? 'kafka-cluster',
          patternType: rule.resource.patternType === 'prefix' ? 'PREFIXED' : 'LITERAL',
        });
      }
    }
  }
  return out;
}

/** Runs `outbox kafka:acls …` in-process; its exit code and what it printed. */
async function run(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const program = new Command('outbox').exitOverride().option('--log-level <level>');
  program.addCommand(kafkaAclsCommand().exitOverride());
  const out: string[] = [];
  const err: string[] = [];
  const stdout = jest.spyOn(process.stdout, 'write').mockImplementation((chunk) => out.push(String(chunk)) > 0);
  const stderr = jest.spyOn(process.stderr, 'write').mockImplementation((chunk) => err.push(String(chunk)) > 0);
  const before = process.exitCode;
  const env = { ...process.env };
  try {
    Object.assign(process.env, SECRET_ENV);
    await program.parseAsync(['node', 'outbox', 'kafka:acls', ...argv, '--log-level', 'silent']);
    return { code: Number(process.exitCode ?? 0), stdout: out.join(''), stderr: err.join('') };
  } finally {
    stdout.mockRestore();
    stderr.mockRestore();
    process.exitCode = before;
    process.env = env;
  }
}

describe('kafka:acls renderers', () => {
  const eos = planKafkaAcls(config({ connector: { exactlyOnce: true }, acls: { idempotentWriteAcl: true } }));

  it('kafka-acls lines parse back into the same plan, one line per ACL', () => {
    const text = renderKafkaAcls(eos, { bootstrapServer: 'b1:9093,b2:9093', commandConfig: '/etc/kafka/admin client.properties' });
    const parsed = parseKafkaAcls(text);
    expect(parsed).toHaveLength(eos.plan.length);
    expect(parsed.map(key).sort()).toEqual(keys(eos));
    for (const p of parsed) expect(p).toMatchObject({ host: '*', bootstrap: 'b1:9093,b2:9093', commandConfig: '/etc/kafka/admin client.properties' });
    // Grouped per principal, each group under a comment naming it and its parts.
    for (const { principal, components } of eos.principals) expect(text).toContain(`\n# ${principal}: ${components.join(', ')}\n`);
    expect(text.split('\n').filter((l) => l.startsWith('#   '))).toHaveLength(0);
    const explained = renderKafkaAcls(eos, { bootstrapServer: 'b1:9093', commandConfig: 'admin.properties', explain: true });
    expect(explained.split('\n').filter((l) => l.startsWith('#   '))).toHaveLength(eos.plan.length);
    expect(explained).toContain('#   router: dead-letters a record');
  });

  it('Strimzi KafkaUser YAML follows the AclRule schema and holds the same plan', () => {
    const text = renderStrimziUsers(eos, { cluster: 'prod-kafka', namespace: 'kafka' });
    expect(parseStrimzi(text).map(key).sort()).toEqual(keys(eos));
    const names = parseAllDocuments(text).map((d) => (d.toJS() as { metadata?: { name: string; namespace: string } } | null)?.metadata).filter(Boolean);
    expect(names).toEqual(eos.principals.map((p) => ({ name: p.principal.slice('User:'.length), namespace: 'kafka', labels: { 'strimzi.io/cluster': 'prod-kafka' } })));
    expect(text).toContain('      # router: dead-letters a record');
  });

  it('JSON holds the report as it is', () => {
    expect(JSON.parse(renderAclsJson(eos))).toEqual(JSON.parse(JSON.stringify(eos)));
  });

  it('a principal Strimzi cannot name is refused with ACL_PRINCIPAL_INVALID', () => {
    expect(strimziUserName('User:outbox-router')).toBe('outbox-router');
    for (const bad of ['User:Outbox_Router', 'Group:ops', 'User:-x']) expect(thrown(() => strimziUserName(bad)).code).toBe('ACL_PRINCIPAL_INVALID');
    const report = planKafkaAcls(config({ acls: { relayPrincipal: 'User:CN=relay,O=acme' } }), { components: ['relay'] });
    const e = thrown(() => renderStrimziUsers(report, { cluster: 'my-cluster' }));
    expect(e.message).toContain('"User:CN=relay,O=acme"');
    // The same principal is fine for kafka-acls.sh.
    const lines = parseKafkaAcls(renderKafkaAcls(report, { bootstrapServer: 'b:9092', commandConfig: 'a.properties' }));
    expect(lines.map((l) => l.principal)).toEqual(['User:CN=relay,O=acme', 'User:CN=relay,O=acme']);
  });

  it('shellWord quotes what a shell would split or expand', () => {
    expect(shellWord('outbox.event.')).toBe('outbox.event.');
    expect(shellWord('*')).toBe("'*'");
    expect(shellWord("it's $x")).toBe(`'it'\\''s $x'`);
  });

  it('the command prints every format for the default config, never a secret', async () => {
    const text = await run('--explain');
    expect(text).toMatchObject({ code: 0, stderr: '' });
    expect(parseKafkaAcls(text.stdout).map(key).sort()).toEqual(keys(planKafkaAcls(config())));
    expect(text.stdout).toContain('--bootstrap-server 127.0.0.1:9092 --command-config admin.properties');
    const json = await run('--format', 'json', '--only', 'router,relay', '--consumer', 'billing');
    expect(JSON.parse(json.stdout).principals).toEqual([
      { principal: 'User:outbox-router', components: ['router'] },
      { principal: 'User:outbox-relay', components: ['relay'] },
    ]);
    expect(json.stdout).toContain('"resourceName": "billing"');
    const yaml = await run('--format', 'strimzi', '--strimzi-cluster', 'prod-kafka');
    expect(parseStrimzi(yaml.stdout).map(key).sort()).toEqual(keys(planKafkaAcls(config())));
    for (const r of [text, json, yaml]) for (const secret of SECRETS) expect(r.stdout + r.stderr).not.toContain(secret);
  });

  it('bad flags: exit 1 with FLAG_INVALID naming the flag', async () => {
    const only = await run('--only', 'router,watchdog');
    expect(only.code).toBe(1);
    expect(only.stderr).toContain('unknown part(s) watchdog');
    expect(only.stderr).toContain('FLAG_INVALID');
    const cluster = await run('--format', 'strimzi', '--strimzi-cluster', 'Prod_Kafka');
    expect(cluster.code).toBe(1);
    expect(cluster.stderr).toContain('--strimzi-cluster "Prod_Kafka"');
  });
});
