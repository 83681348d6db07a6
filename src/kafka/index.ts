import { Kafka, logLevel, type KafkaConfig, type logCreator } from 'kafkajs';
import type { OutboxConfig } from '../config';
import type { Logger } from '../log';

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

/**
 * The one place a kafkajs client is built from configuration, so connection settings (brokers, and
 * any TLS/SASL the configuration adds) apply to every part: router, relay, status, bench.
 */
export function createKafka(config: Pick<OutboxConfig, 'kafka'>, options: KafkaClientOptions = {}): Kafka {
  return new Kafka({
    clientId: options.role ? `${config.kafka.clientId}-${options.role}` : config.kafka.clientId,
    brokers: [...config.kafka.brokers],
    logLevel: options.logger ? logLevel.WARN : logLevel.NOTHING,
    ...(options.logger ? { logCreator: kafkaLogTo(options.logger) } : {}),
    retry: { retries: options.retries ?? 10 },
    ...options.overrides,
  });
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
