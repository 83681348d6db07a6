/**
 * Transport security settings reach the clients: kafkajs's config object (TLS, SASL), the axios
 * defaults and https agent of the Kafka Connect client, and the registry's auth and agent. No network:
 * only the objects the clients are built from are inspected.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { Agent as HttpsAgent } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kafka } from 'kafkajs';
import { loadConfig, redactConfig, type OutboxOptions } from '../../../src/config';
import { registryTransport } from '../../../src/codec/registry-connection';
import { connectAxiosConfig } from '../../../src/connector/connect-client';
import { createKafka, kafkaConfig } from '../../../src/kafka';
import { thrown } from '../../support/expect-error';

const dir = mkdtempSync(join(tmpdir(), 'outbox-tls-'));
const pem = (name: string, text: string) => {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
};
const CA = pem('ca.pem', '-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n');
const CERT = pem('client.pem', '-----BEGIN CERTIFICATE-----\nCLIENT\n-----END CERTIFICATE-----\n');
const KEY = pem('client.key', '-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n');

const config = (overrides: OutboxOptions = {}, env: NodeJS.ProcessEnv = {}) => loadConfig({ env, overrides });

describe('Kafka: TLS and SASL in createKafka', () => {
  it('is plain TCP without SASL by default (the local stack)', () => {
    const built = kafkaConfig(config());
    expect(built.ssl).toBe(false);
    expect(built.sasl).toBeUndefined();
    expect(built.brokers).toEqual(['127.0.0.1:9092']);
  });

  it.each(['plain', 'scram-sha-256', 'scram-sha-512'] as const)('passes SASL %s with its username and password from the environment', (mechanism) => {
    const built = kafkaConfig(
      config({}, { OUTBOX_KAFKA_SASL_MECHANISM: mechanism, OUTBOX_KAFKA_SASL_USERNAME: 'svc-outbox', OUTBOX_KAFKA_SASL_PASSWORD: 's3cret' }),
    );
    expect(built.sasl).toEqual({ mechanism, username: 'svc-outbox', password: 's3cret' });
  });

  it('reads the CA, client certificate and key files, with the key passphrase and rejectUnauthorized', () => {
    const built = kafkaConfig(
      config({}, {
        OUTBOX_KAFKA_SSL_CA_FILE: CA,
        OUTBOX_KAFKA_SSL_CERT_FILE: CERT,
        OUTBOX_KAFKA_SSL_KEY_FILE: KEY,
        OUTBOX_KAFKA_SSL_KEY_PASSWORD: 'key-pass',
      }),
    );
    expect(built.ssl).toEqual({
      rejectUnauthorized: true,
      ca: [Buffer.from('-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n')],
      cert: Buffer.from('-----BEGIN CERTIFICATE-----\nCLIENT\n-----END CERTIFICATE-----\n'),
      key: Buffer.from('-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n'),
      passphrase: 'key-pass',
    });
  });

  it('turns TLS on with OUTBOX_KAFKA_SSL=true alone (system CAs), and honours rejectUnauthorized=false', () => {
    expect(kafkaConfig(config({}, { OUTBOX_KAFKA_SSL: 'true' })).ssl).toEqual({ rejectUnauthorized: true });
    expect(kafkaConfig(config({ kafka: { ssl: { enabled: true, rejectUnauthorized: false } } })).ssl).toEqual({ rejectUnauthorized: false });
  });

  it('createKafka builds the client from that config (the one factory every part uses)', () => {
    const kafka = createKafka(config({ kafka: { sasl: { mechanism: 'plain', username: 'u', password: 'p' }, ssl: { caFile: CA } } }), { role: 'test' });
    expect(kafka).toBeInstanceOf(Kafka);
  });

  it('names the setting and the path of an unreadable PEM file, never its content', () => {
    const error = thrown(() => kafkaConfig(config({ kafka: { ssl: { caFile: join(dir, 'missing.pem') } } })));
    expect(error.code).toBe('TLS_FILE_UNREADABLE');
    expect(error.details).toEqual({ setting: 'kafka.ssl.caFile (OUTBOX_KAFKA_SSL_CA_FILE)', path: join(dir, 'missing.pem') });
    expect(error.message).toContain('kafka.ssl.caFile (OUTBOX_KAFKA_SSL_CA_FILE)');
    expect(error.message).toContain(join(dir, 'missing.pem'));
  });

  it('rejects an unknown mechanism, and SASL or mutual-TLS settings that are only half there', () => {
    expect(thrown(() => config({}, { OUTBOX_KAFKA_SASL_MECHANISM: 'gssapi', OUTBOX_KAFKA_SASL_USERNAME: 'u', OUTBOX_KAFKA_SASL_PASSWORD: 'p' })).message).toContain(
      'kafka.sasl.mechanism (from OUTBOX_KAFKA_SASL_MECHANISM)',
    );
    const half = thrown(() => config({}, { OUTBOX_KAFKA_SASL_MECHANISM: 'plain', OUTBOX_KAFKA_SASL_USERNAME: 'u' }));
    expect(half.message).toContain('kafka.sasl');
    expect(half.message).toContain('mechanism plain needs username and password');
    expect(thrown(() => config({ kafka: { ssl: { certFile: CERT } } })).message).toContain('certFile and keyFile go together');
  });
});

describe('Kafka Connect REST: basic auth and https', () => {
  it('sends basic auth when connect.username is set', () => {
    const axiosConfig = connectAxiosConfig(config({}, { OUTBOX_CONNECT_USERNAME: 'ops', OUTBOX_CONNECT_PASSWORD: 'pw' }).connect);
    expect(axiosConfig.auth).toEqual({ username: 'ops', password: 'pw' });
    expect(axiosConfig.httpsAgent).toBeUndefined();
    expect(connectAxiosConfig(config().connect).auth).toBeUndefined();
  });

  it('gives an https URL an agent with connect.caFile and connect.rejectUnauthorized', () => {
    const axiosConfig = connectAxiosConfig(
      config({}, { OUTBOX_CONNECT_URL: 'https://connect.example:8443', OUTBOX_CONNECT_CA_FILE: CA, OUTBOX_CONNECT_REJECT_UNAUTHORIZED: 'false' }).connect,
    );
    const agent = axiosConfig.httpsAgent as HttpsAgent;
    expect(agent).toBeInstanceOf(HttpsAgent);
    expect(agent.options.ca).toEqual(Buffer.from('-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n'));
    expect(agent.options.rejectUnauthorized).toBe(false);
  });

  it('moves user:password out of the URL into the auth settings, so messages and --json never show them', () => {
    const settings = config({}, { OUTBOX_CONNECT_URL: 'https://ops:p%40ss@connect.example:8443' }).connect;
    expect(settings.url).toBe('https://connect.example:8443');
    expect(connectAxiosConfig(settings).auth).toEqual({ username: 'ops', password: 'p@ss' });
  });
});

describe('schema registry: credentials and https', () => {
  it('uses registry.username/password, else the URL userinfo, which is stripped', () => {
    expect(registryTransport({ url: 'http://reg:8081', username: 'u', password: 'p' })).toMatchObject({ url: 'http://reg:8081', auth: { username: 'u', password: 'p' } });
    expect(registryTransport({ url: 'http://a:b@reg:8081/apis/ccompat/v7' })).toMatchObject({ url: 'http://reg:8081/apis/ccompat/v7', auth: { username: 'a', password: 'b' } });
    const fromConfig = config({}, { OUTBOX_REGISTRY_URL: 'http://a:b@reg:8081/x' }).registry;
    expect(fromConfig).toMatchObject({ url: 'http://reg:8081/x', username: 'a', password: 'b' });
  });

  it('gives an https registry an agent with the CA file and rejectUnauthorized', () => {
    const { agent } = registryTransport(config({}, { OUTBOX_REGISTRY_URL: 'https://reg.example', OUTBOX_REGISTRY_CA_FILE: CA }).registry);
    expect(agent).toBeInstanceOf(HttpsAgent);
    expect(agent?.options.rejectUnauthorized).toBe(true);
    expect(agent?.options.ca).toEqual(Buffer.from('-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n'));
    expect(registryTransport({ url: 'http://reg:8081' }).agent).toBeUndefined();
  });
});

describe('redaction of the transport secrets', () => {
  it('redactConfig hides the SASL password and the TLS key passphrase, and credentials inside URLs', () => {
    const loaded = config({}, {
      OUTBOX_KAFKA_SASL_MECHANISM: 'plain',
      OUTBOX_KAFKA_SASL_USERNAME: 'u',
      OUTBOX_KAFKA_SASL_PASSWORD: 'sasl-secret',
      OUTBOX_KAFKA_SSL_KEY_PASSWORD: 'key-secret',
      OUTBOX_CONNECT_PASSWORD: 'connect-secret',
    });
    const text = JSON.stringify(redactConfig(loaded));
    for (const secret of ['sasl-secret', 'key-secret', 'connect-secret']) expect(text).not.toContain(secret);
    expect(redactConfig({ url: 'http://u:pw@host/x' })).toEqual({ url: 'http://[redacted]@host/x' });
  });

  it('an invalid URL is echoed in the error without its credentials', () => {
    const error = thrown(() => config({}, { OUTBOX_CONNECT_URL: 'http://ops:hunter2@host:99999999' }));
    expect(error.message).toContain('connect.url (from OUTBOX_CONNECT_URL)');
    expect(error.message).not.toContain('hunter2');
    expect(error.message).toContain('[redacted]@host');
  });
});

describe('errors from the HTTP clients carry no credentials', () => {
  it("a Connect network failure's cause, serialized by the logger, holds neither the password nor the Authorization header", async () => {
    const { AxiosError, AxiosHeaders } = await import('axios');
    const pino = (await import('pino')).default;
    const { createConnectClient } = await import('../../../src/connector');
    const auth = Buffer.from('ops:hunter2-connect').toString('base64');
    const headers = new AxiosHeaders({ Authorization: `Basic ${auth}` });
    const refused = new AxiosError('connect ECONNREFUSED', 'ECONNREFUSED', { auth: { username: 'ops', password: 'hunter2-connect' }, headers } as never, {
      _header: `GET /connectors HTTP/1.1\r\nAuthorization: Basic ${auth}\r\n`,
    });
    const client = createConnectClient({ url: 'http://connect.test:8083', requestTimeoutMs: 1000, username: 'ops', password: 'hunter2-connect' }, {
      http: async () => {
        throw refused;
      },
    });
    const error = (await client.list().then(
      () => undefined,
      (e: unknown) => e,
    )) as Error & { code?: string; cause?: unknown };
    expect(error.code).toBe('CONNECT_UNREACHABLE');
    const lines: string[] = [];
    const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(line) });
    log.error({ err: error }, 'wrapped');
    log.error({ err: error.cause }, 'the cause itself');
    const text = lines.join('\n');
    expect(text).toContain('ECONNREFUSED');
    expect(text).not.toContain('hunter2-connect');
    expect(text).not.toContain(auth);
  });
});
