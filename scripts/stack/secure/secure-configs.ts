import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { KAFKA, REGISTRY_DATABASE } from '../settings';
import type { StackCerts } from './certs';
import { SECURE_CONTROLLER_USER, SECURE_HOST, SECURE_HTTP_USERS, SECURE_KAFKA_USERS, SECURE_PORTS } from './secure-settings';

/** The principals with every right: the brokers themselves, the controller and the stack's admin. */
export const SECURE_SUPER_USERS = ['User:broker', `User:${SECURE_CONTROLLER_USER.name}`, 'User:outbox-admin'];

const jaasValue = (value: string) => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"');
const scramJaas = (user: string, password: string) =>
  `org.apache.kafka.common.security.scram.ScramLoginModule required username="${jaasValue(user)}" password="${jaasValue(password)}";`;

/** What a Kafka client of the secure stack (a broker, Connect, its producers) sets to reach the SCRAM listener. */
export function kafkaClientTls(certs: StackCerts, user: string, password: string, prefix = ''): string[] {
  return [
    `${prefix}security.protocol=SASL_SSL`,
    `${prefix}sasl.mechanism=SCRAM-SHA-512`,
    `${prefix}sasl.jaas.config=${scramJaas(user, password)}`,
    `${prefix}ssl.truststore.type=PEM`,
    `${prefix}ssl.truststore.location=${certs.caCert}`,
    // Kafka's default, written out: the broker's certificate must name the host the client dialled.
    `${prefix}ssl.endpoint.identification.algorithm=https`,
  ];
}

/**
 * One KRaft node (broker + controller) with three SASL_SSL listeners and no plain-text one:
 * SCRAM-SHA-512 for clients and inter-broker traffic, PLAIN for the controller (KRaft keeps SCRAM
 * credentials in the metadata log the controller serves, so the controller cannot authenticate with
 * them), and OAUTHBEARER validated by Kafka's unsecured JWS validator. StandardAuthorizer denies
 * everything no ACL allows (allow.everyone.if.no.acl.found=false).
 */
export function secureKafkaProperties(certs: StackCerts, dataDir: string): string {
  const ks = certs.services.kafka;
  const brokerPassword = SECURE_KAFKA_USERS.broker;
  const controller = SECURE_CONTROLLER_USER;
  const plain = `org.apache.kafka.common.security.plain.PlainLoginModule required username="${controller.name}" password="${jaasValue(controller.password)}" user_${controller.name}="${jaasValue(controller.password)}";`;
  return [
    '# The secure profile of the native stack: rendered by `outbox stack up --profile secure`.',
    'process.roles=broker,controller',
    'node.id=1',
    `controller.quorum.voters=1@${SECURE_HOST}:${SECURE_PORTS.kafkaController}`,
    `listeners=SCRAM://${SECURE_HOST}:${SECURE_PORTS.kafka},CONTROLLER://${SECURE_HOST}:${SECURE_PORTS.kafkaController},OAUTH://${SECURE_HOST}:${SECURE_PORTS.kafkaOauth}`,
    `advertised.listeners=SCRAM://${SECURE_HOST}:${SECURE_PORTS.kafka},OAUTH://${SECURE_HOST}:${SECURE_PORTS.kafkaOauth}`,
    'listener.security.protocol.map=SCRAM:SASL_SSL,CONTROLLER:SASL_SSL,OAUTH:SASL_SSL',
    'inter.broker.listener.name=SCRAM',
    'controller.listener.names=CONTROLLER',
    'sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512',
    'sasl.mechanism.controller.protocol=PLAIN',
    'listener.name.scram.sasl.enabled.mechanisms=SCRAM-SHA-512',
    `listener.name.scram.scram-sha-512.sasl.jaas.config=${scramJaas('broker', brokerPassword)}`,
    'listener.name.controller.sasl.enabled.mechanisms=PLAIN',
    `listener.name.controller.plain.sasl.jaas.config=${plain}`,
    'listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER',
    // The broker's own login on this listener (it never uses it); tokens of clients are checked by the
    // unsecured validator, Kafka's default for OAUTHBEARER: signature-less JWS, `sub` is the principal.
    'listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";',
    'listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler',
    'ssl.keystore.type=PKCS12',
    `ssl.keystore.location=${ks.keystore}`,
    `ssl.keystore.password=${certs.keystorePassword}`,
    'ssl.truststore.type=PEM',
    `ssl.truststore.location=${certs.caCert}`,
    'ssl.endpoint.identification.algorithm=https',
    'authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer',
    'allow.everyone.if.no.acl.found=false',
    `super.users=${SECURE_SUPER_USERS.join(';')}`,
    `log.dirs=${dataDir}`,
    'num.partitions=1',
    'offsets.topic.replication.factor=1',
    'offsets.topic.num.partitions=4',
    'transaction.state.log.replication.factor=1',
    'transaction.state.log.min.isr=1',
    'transaction.state.log.num.partitions=4',
    'share.coordinator.state.topic.replication.factor=1',
    'share.coordinator.state.topic.min.isr=1',
    'group.initial.rebalance.delay.ms=0',
    'num.network.threads=2',
    'num.io.threads=2',
    'background.threads=2',
    // Topics are created on purpose (the connector's topic.creation, the router's DLQ set-up), as in production.
    'auto.create.topics.enable=false',
    '',
  ].join('\n');
}

/** `kafka-storage format --add-scram …`: every SCRAM user exists before the broker's first start. */
export function scramFormatArgs(): string[] {
  return Object.entries(SECURE_KAFKA_USERS).flatMap(([name, password]) => ['--add-scram', `SCRAM-SHA-512=[name=${name},password=${password}]`]);
}

/**
 * The Connect worker: REST on https with basic auth (Kafka's BasicAuthSecurityRestExtension and its
 * PropertyFileLoginModule), and every Kafka client it makes (its own, its source tasks' producers, the
 * admin that creates topics) authenticated as `outbox-connect`.
 */
export function secureConnectProperties(certs: StackCerts, pluginPath: string): string {
  const ks = certs.services.connect;
  const user = 'outbox-connect';
  const password = SECURE_KAFKA_USERS[user];
  return [
    '# The secure profile of the native stack: rendered by `outbox stack up --profile secure`.',
    `bootstrap.servers=${SECURE_HOST}:${SECURE_PORTS.kafka}`,
    ...kafkaClientTls(certs, user, password),
    ...kafkaClientTls(certs, user, password, 'producer.'),
    ...kafkaClientTls(certs, user, password, 'consumer.'),
    ...kafkaClientTls(certs, user, password, 'admin.'),
    `group.id=${KAFKA.connectGroupId}`,
    'key.converter=org.apache.kafka.connect.json.JsonConverter',
    'value.converter=org.apache.kafka.connect.json.JsonConverter',
    'key.converter.schemas.enable=false',
    'value.converter.schemas.enable=false',
    `config.storage.topic=${KAFKA.connectConfigTopic}`,
    `offset.storage.topic=${KAFKA.connectOffsetTopic}`,
    `status.storage.topic=${KAFKA.connectStatusTopic}`,
    'config.storage.replication.factor=1',
    'offset.storage.replication.factor=1',
    'status.storage.replication.factor=1',
    'offset.storage.partitions=1',
    'status.storage.partitions=1',
    'offset.flush.interval.ms=1000',
    'scheduled.rebalance.max.delay.ms=0',
    'exactly.once.source.support=disabled',
    `listeners=https://${SECURE_HOST}:${SECURE_PORTS.connect}`,
    'listeners.https.ssl.keystore.type=PKCS12',
    `listeners.https.ssl.keystore.location=${ks.keystore}`,
    `listeners.https.ssl.keystore.password=${certs.keystorePassword}`,
    'rest.advertised.listener=https',
    `rest.advertised.host.name=${SECURE_HOST}`,
    `rest.advertised.port=${SECURE_PORTS.connect}`,
    'rest.extension.classes=org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension',
    `plugin.path=${pluginPath}`,
    'plugin.discovery=service_load',
    'config.providers=env,file',
    'config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider',
    'config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider',
    '',
  ].join('\n');
}

/** The JAAS file BasicAuthSecurityRestExtension reads (login context KafkaConnect). */
export function connectJaas(usersFile: string): string {
  return `KafkaConnect {\n  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required\n  file="${jaasValue(usersFile)}";\n};\n`;
}

export function connectUsers(): string {
  const { username, password } = SECURE_HTTP_USERS.connect;
  return `${username}: ${password}\n`;
}

/** nginx in front of Apicurio: TLS with the registry's certificate, basic auth, then plain http on loopback. */
export function nginxConf(certs: StackCerts, stateDir: string, htpasswd: string): string {
  const reg = certs.services.registry;
  return [
    'daemon off;',
    'worker_processes 1;',
    `pid ${join(stateDir, 'pids', 'nginx.pid')};`,
    `error_log ${join(stateDir, 'logs', 'registry-proxy.log')} warn;`,
    'events { worker_connections 256; }',
    'http {',
    `  access_log off;`,
    `  client_body_temp_path ${join(stateDir, 'nginx', 'body')};`,
    `  proxy_temp_path ${join(stateDir, 'nginx', 'proxy')};`,
    `  fastcgi_temp_path ${join(stateDir, 'nginx', 'fastcgi')};`,
    `  uwsgi_temp_path ${join(stateDir, 'nginx', 'uwsgi')};`,
    `  scgi_temp_path ${join(stateDir, 'nginx', 'scgi')};`,
    '  server {',
    `    listen ${SECURE_HOST}:${SECURE_PORTS.registry} ssl;`,
    `    ssl_certificate ${reg.cert};`,
    `    ssl_certificate_key ${reg.key};`,
    '    ssl_protocols TLSv1.2 TLSv1.3;',
    '    auth_basic "outbox-router schema registry";',
    `    auth_basic_user_file ${htpasswd};`,
    '    location / {',
    `      proxy_pass http://${SECURE_HOST}:${SECURE_PORTS.registryBackend};`,
    '      proxy_set_header Host $host:$server_port;',
    '      proxy_set_header X-Forwarded-Proto https;',
    // The backend must not see the client's credentials.
    '      proxy_set_header Authorization "";',
    '    }',
    '  }',
    '}',
    '',
  ].join('\n');
}

/** nginx's user file: `{SSHA}` (salted SHA-1, which nginx's auth_basic reads) of the registry user's password. */
export function htpasswd(): string {
  const { username, password } = SECURE_HTTP_USERS.registry;
  const salt = randomBytes(8);
  const digest = createHash('sha1').update(password).update(salt).digest();
  return `${username}:{SSHA}${Buffer.concat([digest, salt]).toString('base64')}\n`;
}

/** PostgreSQL: TLS on, SCRAM only. */
export function securePostgresConf(files: { cert: string; key: string; ca: string }): string {
  return [
    'ssl = on',
    `ssl_cert_file = '${files.cert}'`,
    `ssl_key_file = '${files.key}'`,
    `ssl_ca_file = '${files.ca}'`,
    "ssl_min_protocol_version = 'TLSv1.2'",
    "password_encryption = 'scram-sha-256'",
  ].join('\n');
}

/** hostssl only, scram-sha-256 only: a plain-text connection finds no entry and is refused; no trust anywhere. */
export function securePgHba(): string {
  return [
    '# The secure profile of the native stack: rendered by `outbox stack up --profile secure`.',
    '# TYPE   DATABASE     USER  ADDRESS        METHOD',
    'local    all          all                  scram-sha-256',
    'hostssl  all          all   127.0.0.1/32   scram-sha-256',
    'hostssl  replication  all   127.0.0.1/32   scram-sha-256',
    '',
  ].join('\n');
}

/** Apicurio's JDBC URL: its storage in the secure PostgreSQL, over TLS with the CA checked and the host verified. */
export function registryJdbcUrl(certs: StackCerts): string {
  return `jdbc:postgresql://${SECURE_HOST}:${SECURE_PORTS.postgres}/${REGISTRY_DATABASE}?sslmode=verify-full&sslrootcert=${encodeURIComponent(certs.caCert)}`;
}


/** The stack admin's client properties (kafka-configs.sh, kafka-acls.sh --command-config). */
export function adminClientProperties(certs: StackCerts): string {
  return `${kafkaClientTls(certs, 'outbox-admin', SECURE_KAFKA_USERS['outbox-admin']).join('\n')}\n`;
}
