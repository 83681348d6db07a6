import { stringify } from 'yaml';
import { OutboxError } from '../errors';
import type { AclEntry, AclReport, AclResourceType } from './plan';

/**
 * The plan in three forms: `kafka-acls.sh` lines to paste, Strimzi KafkaUser resources to apply, JSON
 * for anything else. None of them holds a secret: the admin client's credentials stay in the
 * `--command-config` file the lines only name, and Strimzi's User Operator makes each user's password.
 */

export const ACL_FORMATS = ['kafka-acls', 'strimzi', 'json'] as const;
export type AclFormat = (typeof ACL_FORMATS)[number];

export interface KafkaAclsOptions {
  /** `--bootstrap-server`: the brokers (default: kafka.brokers). */
  bootstrapServer: string;
  /** `--command-config`: the admin client's properties file (its SASL/TLS settings); only its path is printed. */
  commandConfig: string;
  /** A comment with the reason above each line. */
  explain?: boolean;
}

export interface StrimziUserOptions {
  /** The Kafka resource's name: the `strimzi.io/cluster` label the User Operator watches. */
  cluster: string;
  namespace?: string;
}

/** kafka-acls.sh's flag for each resource type; the cluster resource takes no name. */
const RESOURCE_FLAG: Readonly<Record<AclResourceType, string>> = { TOPIC: '--topic', GROUP: '--group', CLUSTER: '--cluster', TRANSACTIONAL_ID: '--transactional-id' };

/** A word for a POSIX shell: as it is when it holds only safe characters, else single-quoted. */
export function shellWord(value: string): string {
  return /^[A-Za-z0-9._:,/@%+=-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}

function grouped(report: AclReport): Array<{ principal: string; components: readonly string[]; entries: AclEntry[] }> {
  return report.principals.map((p) => ({ ...p, entries: report.plan.filter((e) => e.principal === p.principal) }));
}

/** One `kafka-acls.sh --add` line per ACL, grouped per principal under a comment naming its parts. */
export function renderKafkaAcls(report: AclReport, options: KafkaAclsOptions): string {
  const out: string[] = ['#!/bin/sh', '# Kafka ACLs for outbox-router (outbox kafka:acls; docs/kafka-acls.md). Run with an admin principal.', 'set -e'];
  for (const w of report.warnings) out.push(`# WARNING: ${w}`);
  for (const { principal, components, entries } of grouped(report)) {
    out.push('', `# ${principal}: ${components.join(', ')}`);
    for (const e of entries) {
      if (options.explain) out.push(`#   ${e.why}`);
      const resource = e.resourceType === 'CLUSTER' ? RESOURCE_FLAG.CLUSTER : `${RESOURCE_FLAG[e.resourceType]} ${shellWord(e.resourceName)}`;
      out.push(
        [
          'kafka-acls.sh',
          `--bootstrap-server ${shellWord(options.bootstrapServer)}`,
          `--command-config ${shellWord(options.commandConfig)}`,
          '--add',
          `--allow-principal ${shellWord(e.principal)}`,
          `--allow-host ${shellWord(e.host)}`,
          `--operation ${e.operation}`,
          resource,
          `--resource-pattern-type ${e.patternType.toLowerCase()}`,
        ].join(' '),
      );
    }
  }
  return `${out.join('\n')}\n`;
}

/** Strimzi's names for resource types and pattern types (the KafkaUser CRD's AclRule: topic|group|cluster|transactionalId, literal|prefix). */
const STRIMZI_TYPE: Readonly<Record<AclResourceType, string>> = { TOPIC: 'topic', GROUP: 'group', CLUSTER: 'cluster', TRANSACTIONAL_ID: 'transactionalId' };
/** A Kubernetes resource name (RFC 1123 subdomain), which a KafkaUser's name, and so the user's name, must be. */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** The KafkaUser name of a principal: Strimzi's users are `User:<metadata.name>`. */
export function strimziUserName(principal: string): string {
  const name = principal.startsWith('User:') ? principal.slice('User:'.length) : undefined;
  if (name === undefined || name.length > 253 || !DNS_SUBDOMAIN.test(name)) {
    throw new OutboxError(
      'ACL_PRINCIPAL_INVALID',
      `The principal ${JSON.stringify(principal)} cannot be a Strimzi KafkaUser: the User Operator names the user after the resource (User:<metadata.name>), ` +
        'which must be lower-case letters, digits, "-" and ".". Set the acls.*Principal setting the plan names it for to such a name (e.g. OUTBOX_ACLS_ROUTER_PRINCIPAL=User:outbox-router), or use --format kafka-acls.',
      { details: { principal } },
    );
  }
  return name;
}

/**
 * One KafkaUser per principal (apiVersion kafka.strimzi.io/v1beta2, SCRAM-SHA-512, simple
 * authorization), its ACL rules one per resource with the operations it needs, each rule's reasons in a
 * comment above it. The User Operator creates the password in a Secret named after the user.
 */
export function renderStrimziUsers(report: AclReport, options: StrimziUserOptions): string {
  const docs: string[] = [];
  for (const { principal, components, entries } of grouped(report)) {
    const name = strimziUserName(principal);
    const rules: Array<{ key: string; entry: AclEntry; operations: string[]; whys: string[] }> = [];
    for (const e of entries) {
      const key = [e.resourceType, e.patternType, e.resourceName].join('\u0000');
      let rule = rules.find((r) => r.key === key);
      if (!rule) rules.push((rule = { key, entry: e, operations: [], whys: [] }));
      rule.operations.push(e.operation);
      if (!rule.whys.includes(e.why)) rule.whys.push(e.why);
    }
    const resource = {
      apiVersion: 'kafka.strimzi.io/v1beta2',
      kind: 'KafkaUser',
      metadata: { name, ...(options.namespace ? { namespace: options.namespace } : {}), labels: { 'strimzi.io/cluster': options.cluster } },
      spec: {
        authentication: { type: 'scram-sha-512' },
        authorization: {
          type: 'simple',
          acls: rules.map(({ entry: e, operations }) => ({
            resource: e.resourceType === 'CLUSTER' ? { type: 'cluster' } : { type: STRIMZI_TYPE[e.resourceType], name: e.resourceName, patternType: e.patternType === 'PREFIXED' ? 'prefix' : 'literal' },
            operations,
            host: '*',
          })),
        },
      },
    };
    // The reasons go in as comments, one block above each rule, by rule order.
    const lines = stringify(resource, { lineWidth: 0 }).trimEnd().split('\n');
    let rule = 0;
    const withWhy = lines.flatMap((line) => {
      const item = /^( *)- resource:$/.exec(line);
      if (!item) return [line];
      const whys = rules[rule++]?.whys ?? [];
      return [...whys.map((w) => `${item[1]}# ${w}`), line];
    });
    docs.push([`# ${principal}: ${components.join(', ')}`, ...withWhy].join('\n'));
  }
  const head = ['# Kafka ACLs for outbox-router as Strimzi KafkaUser resources (outbox kafka:acls --format strimzi; docs/kafka-acls.md).', ...report.warnings.map((w) => `# WARNING: ${w}`)];
  return `${head.join('\n')}\n---\n${docs.join('\n---\n')}\n`;
}

/** The report as JSON: principals, every ACL with its reason, warnings. */
export function renderAclsJson(report: AclReport): string {
  return `${JSON.stringify(report, null, 2)}\n`;
}
