import { Kafka, logLevel, type KafkaConfig, type logCreator, type SASLOptions } from 'kafkajs';
import type { ConnectionOptions } from 'node:tls';
import { readPemFile as readPem, type OutboxConfig } from '../config';
import type { OutboxError } from '../errors';
import { credentialFailure } from '../errors/credentials';
import type { Logger } from '../log';
import { configuredOAuthBearerProvider } from './oauthbearer';
import { fixRequestQueueIdleLoop } from './request-queue-fix';

// Every kafkajs client of the toolkit is made through this module: its idle connections stop spinning.
fixRequestQueueIdleLoop();
export { fixRequestQueueIdleLoop };
export { clientCredentialsProvider, mskIamProvider, staticTokenProvider, TOKEN_REFRESH_MARGIN_MS, MSK_IAM_SIGNER_PACKAGE, type ClientCredentialsOptions, type MskIamSigner } from './oauthbearer';

export interface KafkaClientOptions {
  /** Appended to config.kafka.clientId, so broker logs tell the parts apart (e.g. "router", "relay"). */
  role?: string;
  /** Where kafkajs's own log lines go; without one they are dropped. */
  logger?: Logger;
  /** kafkajs client retries (connection-level); default 10. */
  retries?: number;
  /** Overrides for tests and special cases (e.g. a socketFactory that injects faults). */
  overrides?: Partial<KafkaConfig>;
}

type KafkaSettings = OutboxConfig['kafka'];
/** `config.kafka.sasl`, whose OAUTHBEARER and AWS sections code that builds settings by hand may leave out. */
type SaslSettings = Omit<KafkaSettings['sasl'], 'oauthbearer' | 'aws'> & Partial<Pick<KafkaSettings['sasl'], 'oauthbearer' | 'aws'>>;
/** `config.kafka`; ssl and sasl may be left out by code that builds settings by hand. */
export type KafkaConnectionSettings = Pick<KafkaSettings, 'brokers' | 'clientId'> & Partial<Pick<KafkaSettings, 'ssl'>> & { sasl?: SaslSettings };

/** kafkajs's `ssl`: false (plain TCP), or TLS options with the configured CA, client certificate and key. */
export function kafkaSsl(ssl: KafkaSettings['ssl'] | undefined): boolean | ConnectionOptions {
  if (!ssl || !(ssl.enabled || ssl.caFile || ssl.certFile || ssl.keyFile)) return false;
  return {
    rejectUnauthorized: ssl.rejectUnauthorized,
    ...(ssl.caFile ? { ca: [readPem(ssl.caFile, 'kafka.ssl.caFile (OUTBOX_KAFKA_SSL_CA_FILE)')] } : {}),
    ...(ssl.certFile ? { cert: readPem(ssl.certFile, 'kafka.ssl.certFile (OUTBOX_KAFKA_SSL_CERT_FILE)') } : {}),
    ...(ssl.keyFile ? { key: readPem(ssl.keyFile, 'kafka.ssl.keyFile (OUTBOX_KAFKA_SSL_KEY_FILE)') } : {}),
    ...(ssl.keyPassword ? { passphrase: ssl.keyPassword } : {}),
  };
}

/**
 * kafkajs's `sasl`, or undefined when no mechanism is configured (the schema checks each mechanism has
 * its settings). OAUTHBEARER and aws-msk-iam (OAUTHBEARER with AWS's signed token) get a token provider.
 */
export function kafkaSasl(sasl: SaslSettings | undefined): SASLOptions | undefined {
  if (!sasl?.mechanism) return undefined;
  if (sasl.mechanism === 'oauthbearer' || sasl.mechanism === 'aws-msk-iam') {
    const provider = configuredOAuthBearerProvider(sasl);
    return provider ? { mechanism: 'oauthbearer', oauthBearerProvider: provider } : undefined;
  }
  if (sasl.username === undefined || sasl.password === undefined) return undefined;
  return { mechanism: sasl.mechanism, username: sasl.username, password: sasl.password } as SASLOptions;
}

/** Who the brokers see: the SASL username, the OAuth client id or the mechanism, for error messages (never a secret). */
export function kafkaPrincipal(sasl: SaslSettings | undefined): string | undefined {
  if (!sasl?.mechanism) return undefined;
  if (sasl.username !== undefined) return sasl.username;
  if (sasl.mechanism === 'oauthbearer') return sasl.oauthbearer?.clientId ?? '(the OAUTHBEARER token\'s subject)';
  return `(${sasl.mechanism} credentials)`;
}

/**
 * A kafkajs failure refused over SASL, an ACL or TLS, as its one clear error (src/errors/credentials.ts),
 * naming the brokers and the principal; undefined for anything else (an outage keeps its own wrapping).
 */
export function kafkaCredentialFailure(error: unknown, kafka: KafkaConnectionSettings, what = 'connecting'): OutboxError | undefined {
  const tls = kafkaSsl(kafka.ssl) !== false;
  const principal = kafkaPrincipal(kafka.sasl);
  const oauthbearer = kafka.sasl?.mechanism === 'oauthbearer' || kafka.sasl?.mechanism === 'aws-msk-iam';
  return credentialFailure(error, { hop: 'kafka', target: kafka.brokers.join(','), tls, oauthbearer, ...(principal ? { principal } : {}) }, what);
}

/** The kafkajs config createKafka builds: exported so tests can check what reaches the client without a broker. */
export function kafkaConfig(config: { kafka: KafkaConnectionSettings }, options: KafkaClientOptions = {}): KafkaConfig {
  const sasl = kafkaSasl(config.kafka.sasl);
  return {
    clientId: options.role ? `${config.kafka.clientId}-${options.role}` : config.kafka.clientId,
    brokers: [...config.kafka.brokers],
    ssl: kafkaSsl(config.kafka.ssl),
    ...(sasl ? { sasl } : {}),
    logLevel: options.logger ? logLevel.WARN : logLevel.NOTHING,
    ...(options.logger ? { logCreator: kafkaLogTo(options.logger) } : {}),
    retry: { retries: options.retries ?? 10 },
    ...options.overrides,
  };
}

/**
 * The one place a kafkajs client is built from configuration, so connection settings (brokers, TLS
 * and SASL) apply to every part: router, relay, status, bench.
 */
export function createKafka(config: { kafka: KafkaConnectionSettings }, options: KafkaClientOptions = {}): Kafka {
  return new Kafka(kafkaConfig(config, options));
}

/** kafkajs's own log lines go to our logger instead of the console. */
export function kafkaLogTo(logger: Logger): logCreator {
  return () =>
    ({ level, log }) => {
      const { message, ...rest } = log;
      const method = level <= logLevel.ERROR ? 'error' : level === logLevel.WARN ? 'warn' : level === logLevel.INFO ? 'info' : 'debug';
      logger[method]({ kafkajs: rest }, message);
    };
}
