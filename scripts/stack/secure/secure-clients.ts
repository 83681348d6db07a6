import { readFileSync } from 'node:fs';
import axios from 'axios';
import { Kafka, logLevel, type Admin, type KafkaConfig } from 'kafkajs';
import { Client } from 'pg';
import type { StackCerts } from './certs';
import { SECURE_HOST, SECURE_HTTP_USERS, SECURE_KAFKA_USERS, SECURE_PORTS, SECURE_POSTGRES, secureUrls, type SecureKafkaUser } from './secure-settings';

/**
 * The secure stack's own clients (probes, set-up, ACLs): each verifies the server against the stack's CA
 * and the host name, and authenticates, as every client of that stack must.
 */
export function secureKafkaConfig(certs: StackCerts, user: SecureKafkaUser = 'outbox-admin'): KafkaConfig {
  return {
    clientId: 'outbox-secure-stack',
    brokers: [...secureUrls.kafkaBrokers],
    ssl: { ca: [readFileSync(certs.caCert)], rejectUnauthorized: true },
    sasl: { mechanism: 'scram-sha-512', username: user, password: SECURE_KAFKA_USERS[user] },
    logLevel: logLevel.NOTHING,
    connectionTimeout: 3_000,
    retry: { retries: 0 },
  };
}

export async function withSecureAdmin<T>(certs: StackCerts, use: (admin: Admin) => Promise<T>): Promise<T> {
  const admin = new Kafka(secureKafkaConfig(certs)).admin();
  await admin.connect();
  try {
    return await use(admin);
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

export function securePgClient(certs: StackCerts, database = 'postgres'): Client {
  return new Client({
    host: SECURE_HOST,
    port: SECURE_PORTS.postgres,
    user: SECURE_POSTGRES.user,
    password: SECURE_POSTGRES.password,
    database,
    ssl: { ca: readFileSync(certs.caCert), rejectUnauthorized: true },
    connectionTimeoutMillis: 3_000,
  });
}

export function httpsAgentOptions(certs: StackCerts): { ca: Buffer; rejectUnauthorized: true } {
  return { ca: readFileSync(certs.caCert), rejectUnauthorized: true };
}

/** GET over https with the service's basic auth, verifying the server against the stack's CA. */
export async function secureGet<T>(certs: StackCerts, service: 'connect' | 'registry', path: string): Promise<T> {
  const https = await import('node:https');
  const base = service === 'connect' ? secureUrls.connect : secureUrls.registry;
  const { username, password } = SECURE_HTTP_USERS[service];
  const { data } = await axios.get<T>(`${base}${path}`, { auth: { username, password }, timeout: 3_000, httpsAgent: new https.Agent(httpsAgentOptions(certs)) });
  return data;
}
