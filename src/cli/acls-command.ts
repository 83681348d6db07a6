import { Command, Option } from 'commander';
import { ACL_COMPONENTS, ACL_FORMATS, applyKafkaAcls, planKafkaAcls, renderAclsJson, renderKafkaAcls, renderStrimziUsers, type AclComponent, type AclFormat } from '../acls';
import { OutboxError } from '../errors';
import { createKafka } from '../kafka';
import { loadCommandConfig, withConfigOption, type FlagSetting } from './config-option';
import { action } from './run-command';

interface AclsFlags {
  format: AclFormat;
  explain?: boolean;
  only?: string;
  bootstrapServer?: string;
  commandConfig: string;
  strimziCluster: string;
  namespace?: string;
  apply?: boolean;
}

const FLAG_SETTINGS: readonly FlagSetting[] = [{ flag: '--consumer', path: 'router.consumer' }];

/** A Kubernetes DNS label (the Kafka resource's name and a namespace are labels). */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function components(only: string | undefined): AclComponent[] | undefined {
  if (only === undefined) return undefined;
  const given = only.split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = given.filter((c) => !(ACL_COMPONENTS as readonly string[]).includes(c));
  if (given.length === 0 || unknown.length > 0) {
    throw new OutboxError('FLAG_INVALID', `--only ${JSON.stringify(only)}: ${unknown.length ? `unknown part(s) ${unknown.join(', ')}` : 'no part named'}; pass a comma-separated list of ${ACL_COMPONENTS.join(', ')}.`, {
      details: { flag: '--only', value: only },
    });
  }
  return given as AclComponent[];
}

function label(flag: string, value: string): string {
  if (value.length > 63 || !DNS_LABEL.test(value)) {
    throw new OutboxError('FLAG_INVALID', `${flag} ${JSON.stringify(value)} is not a Kubernetes name: lower-case letters, digits and "-", at most 63 characters.`, { details: { flag, value } });
  }
  return value;
}

/** `outbox kafka:acls`: the least-privilege Kafka ACLs of each principal, printed from the config. */
export function kafkaAclsCommand(): Command {
  return withConfigOption(
    new Command('kafka:acls').description(
      'Print the Kafka ACLs each part of the pipeline needs (Connect workers, the connector, router, dlq:replay, relay, status, console), ' +
        'derived from the config: topic names from connector.topicReplacement, the router\'s group, the principals from acls.* (docs/kafka-acls.md). ' +
        'Prints only and contacts nothing, unless --apply. --format kafka-acls (default): kafka-acls.sh lines; strimzi: KafkaUser resources; json.',
    ),
  )
    .addOption(new Option('--format <format>', 'kafka-acls, strimzi or json').choices([...ACL_FORMATS]).default('kafka-acls'))
    .option('--explain', 'kafka-acls: a comment with the reason above each line (strimzi and json always carry it)')
    .option('--only <parts>', `only these parts, comma-separated: ${ACL_COMPONENTS.join(', ')}`)
    .option('--consumer <name>', 'the router consumer whose group the ACLs name (router.consumer; the group is router.groupId, else this)')
    .option('--bootstrap-server <list>', 'kafka-acls: --bootstrap-server of each line (default: kafka.brokers)')
    .option('--command-config <file>', 'kafka-acls: the admin client properties file (SASL/TLS) each line names; never read', 'admin.properties')
    .option('--strimzi-cluster <name>', 'strimzi: the Kafka resource (strimzi.io/cluster label)', 'my-cluster')
    .option('--namespace <namespace>', 'strimzi: namespace of the KafkaUser resources (default: none, kubectl\'s current)')
    .option('--apply', 'create the ACLs on the brokers (kafka.* settings: a principal allowed to alter ACLs, e.g. a super user) instead of printing them; idempotent')
    .action(
      action(async (opts: AclsFlags, command: Command) => {
        const config = loadCommandConfig(command, FLAG_SETTINGS).config;
        const report = planKafkaAcls(config, { components: components(opts.only) });
        if (opts.apply) {
          const admin = createKafka(config).admin();
          await admin.connect();
          try {
            const created = await applyKafkaAcls(admin, report.plan);
            process.stdout.write(`created ${created} ACL binding(s) for ${report.principals.map((p) => p.principal).join(', ')} on ${config.kafka.brokers.join(',')}\n`);
          } finally {
            await admin.disconnect().catch(() => {});
          }
          return;
        }
        let text: string;
        if (opts.format === 'json') text = renderAclsJson(report);
        else if (opts.format === 'strimzi') {
          text = renderStrimziUsers(report, { cluster: label('--strimzi-cluster', opts.strimziCluster), ...(opts.namespace === undefined ? {} : { namespace: label('--namespace', opts.namespace) }) });
        } else text = renderKafkaAcls(report, { bootstrapServer: opts.bootstrapServer ?? config.kafka.brokers.join(','), commandConfig: opts.commandConfig, explain: Boolean(opts.explain) });
        process.stdout.write(text);
      }),
    );
}
