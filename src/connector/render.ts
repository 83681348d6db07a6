import { stringify } from 'yaml';
import { z } from 'zod';
import type { OutboxConfig } from '../config';
import { parse } from '../config/parse';
import { OutboxError } from '../errors';
import { desiredConnectorConfig, type ConnectorConfig, type DesiredConnectorOptions } from './build-config';

/**
 * `connector:render`: the connector config `connector:deploy` would apply, printed instead of applied,
 * for GitOps and for clusters where the operator owns the connector. Both formats come from
 * desiredConnectorConfig, the deploy's own builder; nothing here maps a setting a second time.
 */

export const RENDER_FORMATS = ['json', 'strimzi'] as const;
export type RenderFormat = (typeof RENDER_FORMATS)[number];

/** Keys Strimzi's operator sets itself from the KafkaConnector resource (metadata.name, spec.class, spec.tasksMax). */
export const STRIMZI_MANAGED_KEYS = ['name', 'connector.class', 'tasks.max'] as const;

/** RFC 1123 names, as Kubernetes checks them (apimachinery's IsDNS1123Label / IsDNS1123Subdomain, IsConfigMapKey). */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const SECRET_KEY = /^[-._a-zA-Z0-9]+$/;
const label = z.string().max(63).regex(DNS_LABEL, 'lower-case letters, digits and "-", at most 63 characters (a Kubernetes DNS label)');
const subdomain = z.string().max(253).regex(DNS_SUBDOMAIN, 'lower-case letters, digits, "-" and ".", at most 253 characters (a Kubernetes resource name)');

export const strimziOptionsSchema = z
  .object({
    /** The KafkaConnect resource's name: the `strimzi.io/cluster` label that assigns the connector to it. */
    cluster: label.default('my-connect-cluster'),
    /** The namespace of the KafkaConnect cluster, the KafkaConnector and the Secret. */
    namespace: label.default('default'),
    /** The Secret holding the CDC role's password; deploy/kubernetes/ names its Secret `outbox-credentials`. */
    secretName: subdomain.default('outbox-credentials'),
    secretKey: z.string().max(253).regex(SECRET_KEY, 'letters, digits, "-", "_" and "." (a Secret key)').default('cdc-password'),
  })
  .strict();

export type StrimziOptions = z.input<typeof strimziOptionsSchema>;

export interface RenderOptions extends DesiredConnectorOptions {
  /** `json` (default): the body of Connect's `POST /connectors`. `strimzi`: a KafkaConnector resource as YAML. */
  format?: RenderFormat;
  /** Only for `strimzi`. */
  strimzi?: StrimziOptions;
}

/** `POST /connectors` takes `{ name, config }`; `PUT /connectors/<name>/config` takes the `config` object alone. */
export interface ConnectorRequestBody {
  name: string;
  config: ConnectorConfig;
}

export interface KafkaConnectorResource {
  apiVersion: 'kafka.strimzi.io/v1beta2';
  kind: 'KafkaConnector';
  metadata: { name: string; namespace: string; labels: { 'strimzi.io/cluster': string } };
  spec: { class: string; tasksMax: number; config: Record<string, string> };
}

/** The connector as `connector:deploy` would write it: the password stays the configured provider reference. */
export function connectorRequestBody(config: OutboxConfig, options: DesiredConnectorOptions = {}): ConnectorRequestBody {
  const desired = desiredConnectorConfig(config, options);
  return { name: desired.name as string, config: desired };
}

/** Strimzi's KubernetesSecretConfigProvider reference: `${secrets:<namespace>/<secret>:<key>}`. */
export function strimziPasswordRef(options: StrimziOptions = {}): string {
  const s = parseStrimzi(options);
  return `\${secrets:${s.namespace}/${s.secretName}:${s.secretKey}}`;
}

/** The CLI flag of each Strimzi option, for error messages. */
export const STRIMZI_FLAGS: Readonly<Record<keyof StrimziOptions, string>> = {
  cluster: '--strimzi-cluster',
  namespace: '--namespace',
  secretName: '--secret-name',
  secretKey: '--secret-key',
};

function parseStrimzi(options: StrimziOptions): z.output<typeof strimziOptionsSchema> {
  const flag = (path: string) => STRIMZI_FLAGS[path as keyof StrimziOptions];
  return parse(strimziOptionsSchema, options, { heading: 'Invalid Strimzi options; nothing was rendered', origin: (p) => (flag(p) ? ` (${flag(p)})` : ''), code: 'FLAG_INVALID' });
}

/**
 * The same config as a Strimzi KafkaConnector. Differences from the JSON body, all deliberate: the
 * password is the Secret reference (the KafkaConnect resource must enable that provider: docs/connector.md),
 * and name, connector.class and tasks.max move to metadata.name, spec.class and spec.tasksMax, where the
 * operator takes them from.
 */
export function strimziConnectorResource(config: OutboxConfig, options: Omit<RenderOptions, 'format'> = {}): KafkaConnectorResource {
  const strimzi = parseStrimzi(options.strimzi ?? {});
  const desired = desiredConnectorConfig(config, { force: options.force, build: { ...options.build, passwordRef: strimziPasswordRef(strimzi) } });
  const name = desired.name as string;
  if (!DNS_SUBDOMAIN.test(name) || name.length > 253) {
    throw new OutboxError(
      'CONFIG_INVALID',
      `connector.name (${JSON.stringify(name)}) cannot be a Kubernetes resource name, which Strimzi uses as the connector's name: use lower-case letters, digits, "-" and "." (OUTBOX_CONNECTOR_NAME).`,
    );
  }
  const managed = new Set<string>(STRIMZI_MANAGED_KEYS);
  return {
    apiVersion: 'kafka.strimzi.io/v1beta2',
    kind: 'KafkaConnector',
    metadata: { name, namespace: strimzi.namespace, labels: { 'strimzi.io/cluster': strimzi.cluster } },
    spec: {
      class: desired['connector.class'] as string,
      tasksMax: Number(desired['tasks.max']),
      config: Object.fromEntries(Object.entries(desired).filter(([key]) => !managed.has(key))),
    },
  };
}

/** The text `outbox connector:render` prints: indented JSON, or YAML for Strimzi. Ends with a newline. */
export function renderConnector(config: OutboxConfig, options: RenderOptions = {}): string {
  const { format = 'json', strimzi, ...desired } = options;
  if (format === 'json') {
    if (strimzi) throw new OutboxError('FLAG_INVALID', `${Object.values(STRIMZI_FLAGS).join(', ')} apply to --format strimzi only; the JSON keeps connector.passwordRef.`);
    return `${JSON.stringify(connectorRequestBody(config, desired), null, 2)}\n`;
  }
  if (format !== 'strimzi') throw new OutboxError('FLAG_INVALID', `--format must be one of ${RENDER_FORMATS.join(', ')}, got ${JSON.stringify(format)}.`);
  const resource = strimziConnectorResource(config, { ...desired, strimzi });
  const header = [
    `# KafkaConnector for the Strimzi KafkaConnect resource ${resource.metadata.labels['strimzi.io/cluster']}. A \${secrets:...} value is resolved`,
    "# by Strimzi's KubernetesSecretConfigProvider: that KafkaConnect needs config.providers and a Role to read",
    '# the Secret (docs/connector.md, "Strimzi"). The secret itself is never in this file.',
  ];
  // lineWidth 0: no folded lines, so the heartbeat query and regexes read as they are stored.
  return `${header.join('\n')}\n${stringify(resource, { lineWidth: 0 })}`;
}
