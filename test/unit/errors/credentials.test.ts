/**
 * The one classifier of refused credentials, ACLs and certificates (src/errors/credentials.ts), fed the
 * libraries' own error classes as they throw them: kafkajs, pg, axios and Node's TLS codes.
 */
import { AxiosError, AxiosHeaders } from 'axios';
import * as kafkajs from 'kafkajs';
import { KafkaJSConnectionError, KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError } from 'kafkajs';
import { DatabaseError } from 'pg';
import { connectionError } from '../../../src/db';
import { OutboxError } from '../../../src/errors';
import { credentialFailure, isCredentialFailure, tlsErrorCode } from '../../../src/errors/credentials';
import { kafkaCredentialFailure } from '../../../src/kafka';

const KAFKA = { brokers: ['kafka-1:9094', 'kafka-2:9094'], clientId: 'outbox-router' };
const scram = { ...KAFKA, ssl: { enabled: true, rejectUnauthorized: true }, sasl: { mechanism: 'scram-sha-512' as const, username: 'outbox-router', password: 's3cret-pw', oauthbearer: {}, aws: {} } };
// Exported by kafkajs at run time, missing from its type declarations.
type ErrorClass = new (message: string, options?: Record<string, unknown>) => Error;
const { KafkaJSConnectionClosedError, KafkaJSSASLAuthenticationError } = kafkajs as unknown as Record<string, ErrorClass>;
const protocol = (type: string, code: number) => new KafkaJSProtocolError({ message: `${type} message`, type, code, retriable: false } as never);
const retriesExceeded = (cause: Error) => new KafkaJSNumberOfRetriesExceeded(cause, { retryCount: 5, retryTime: 100 });
const tlsSocketError = (code: string) => Object.assign(new Error(`tls said ${code}`), { code });
const axiosError = (status: number) =>
  new AxiosError(`Request failed with status code ${status}`, 'ERR_BAD_REQUEST', { headers: new AxiosHeaders() }, {}, { status, statusText: '', data: {}, headers: {}, config: { headers: new AxiosHeaders() } });

describe('Kafka brokers', () => {
  it('SASL authentication failed: KAFKA_AUTH_FAILED naming the brokers, the username and the settings, never the password', () => {
    const error = kafkaCredentialFailure(new KafkaJSSASLAuthenticationError('SASL SCRAM SHA512 authentication failed: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512'), scram);
    expect(error).toBeInstanceOf(OutboxError);
    expect(error?.code).toBe('KAFKA_AUTH_FAILED');
    expect(error?.retriable).toBe(true);
    expect(error?.message).toContain('kafka-1:9094,kafka-2:9094');
    expect(error?.message).toContain('as "outbox-router"');
    expect(error?.message).toContain('OUTBOX_KAFKA_SASL_PASSWORD');
    expect(error?.message).not.toContain('s3cret-pw');
    expect(error?.details).toMatchObject({ hop: 'kafka', kind: 'auth', principal: 'outbox-router' });
  });

  it.each([
    ['TOPIC_AUTHORIZATION_FAILED', 29],
    ['GROUP_AUTHORIZATION_FAILED', 30],
    ['CLUSTER_AUTHORIZATION_FAILED', 31],
    ['TRANSACTIONAL_ID_AUTHORIZATION_FAILED', 53],
  ])('%s (also inside KafkaJSNumberOfRetriesExceeded): KAFKA_ACL_DENIED pointing at kafka:acls', (type, code) => {
    for (const thrown of [protocol(type, code), retriesExceeded(protocol(type, code))]) {
      const error = kafkaCredentialFailure(thrown, scram, 'joining the consumer group');
      expect(error?.code).toBe('KAFKA_ACL_DENIED');
      expect(error?.message).toContain(`(${type})`);
      expect(error?.message).toContain('outbox kafka:acls');
      expect(error?.message).toContain('"outbox-router"');
    }
  });

  it('kafkajs\'s KafkaJSGroupCoordinatorNotFound (how it reports a group it may not read) is KAFKA_ACL_DENIED too', () => {
    const { KafkaJSGroupCoordinatorNotFound } = kafkajs as unknown as Record<string, ErrorClass>;
    const error = kafkaCredentialFailure(new KafkaJSGroupCoordinatorNotFound('Failed to find group coordinator'), scram, 'joining group billing');
    expect(error?.code).toBe('KAFKA_ACL_DENIED');
    expect(error?.message).toContain('GROUP_AUTHORIZATION_FAILED');
  });

  it.each([
    ['SELF_SIGNED_CERT_IN_CHAIN', /not trusted .*OUTBOX_KAFKA_SSL_CA_FILE/],
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', /not trusted .*OUTBOX_KAFKA_SSL_CA_FILE/],
    ['DEPTH_ZERO_SELF_SIGNED_CERT', /not trusted/],
    ['CERT_HAS_EXPIRED', /expired or is not valid yet .*renew/],
    ['ERR_TLS_CERT_ALTNAME_INVALID', /does not name kafka-1:9094,kafka-2:9094/],
    ['ERR_SSL_WRONG_VERSION_NUMBER', /does not speak TLS/],
  ])('a certificate refused with %s: KAFKA_TLS_FAILED with the fix', (code, message) => {
    const thrown = retriesExceeded(new KafkaJSConnectionError(`Connection error: tls said ${code}`, { broker: 'kafka-1:9094', code } as never));
    const error = kafkaCredentialFailure(thrown, scram);
    expect(error?.code).toBe('KAFKA_TLS_FAILED');
    expect(error?.message).toMatch(message);
  });

  it('plain text to a TLS-only listener (the broker closes the connection) says to turn TLS on; with TLS on a closed connection is an outage', () => {
    const closed = retriesExceeded(new KafkaJSConnectionClosedError('Closed connection', { host: 'kafka-1', port: 9094 }));
    const plain = kafkaCredentialFailure(closed, { ...KAFKA, sasl: scram.sasl });
    expect(plain?.code).toBe('KAFKA_TLS_FAILED');
    expect(plain?.message).toContain('Turn TLS on (kafka.ssl.enabled (OUTBOX_KAFKA_SSL))');
    expect(kafkaCredentialFailure(closed, scram)).toBeUndefined();
  });

  it('OAUTHBEARER: a connection dropped after authentication (how kafkajs meets a refused token) is KAFKA_AUTH_FAILED; with SCRAM it is not', () => {
    const { KafkaJSBrokerNotFound } = kafkajs as unknown as Record<string, ErrorClass>;
    const dropped = retriesExceeded(new KafkaJSBrokerNotFound('No brokers in the broker pool'));
    const oauth = { ...scram, sasl: { mechanism: 'oauthbearer' as const, oauthbearer: { token: 't' }, aws: {} } };
    expect(kafkaCredentialFailure(dropped, oauth)?.message).toContain('OAUTHBEARER token refused');
    expect(kafkaCredentialFailure(dropped, scram)).toBeUndefined();
  });

  it('an outage is not a credential failure: the caller keeps its own error', () => {
    expect(kafkaCredentialFailure(retriesExceeded(new KafkaJSConnectionError('Connection error: connect ECONNREFUSED', { code: 'ECONNREFUSED' } as never)), scram)).toBeUndefined();
    expect(kafkaCredentialFailure(protocol('NOT_LEADER_FOR_PARTITION', 6), scram)).toBeUndefined();
  });
});

describe('PostgreSQL', () => {
  const config = { host: 'db.internal', port: 5432, database: 'app', user: 'outbox_router', password: 'pg-secret-pw', ssl: false as const };
  const pgError = (code: string, message: string) => Object.assign(new DatabaseError(message, 0, 'error'), { code });

  it('28P01 (wrong password): DB_AUTH_FAILED naming the role and PGPASSWORD, never the password', () => {
    const error = connectionError(config, pgError('28P01', 'password authentication failed for user "outbox_router"'));
    expect(error.code).toBe('DB_AUTH_FAILED');
    expect(error.message).toContain('PostgreSQL at db.internal:5432/app refused the credentials as "outbox_router"');
    expect(error.message).toContain('PGUSER / PGPASSWORD');
    expect(error.message).not.toContain('pg-secret-pw');
  });

  it('28000 without TLS (a hostssl-only server): DB_AUTH_FAILED that also says to turn TLS on; with TLS on it does not', () => {
    const hba = pgError('28000', 'no pg_hba.conf entry for host "127.0.0.1", user "outbox_router", database "app", no encryption');
    expect(connectionError(config, hba).message).toContain('accepts only TLS (hostssl), turn it on: database.sslMode (OUTBOX_DB_SSL_MODE=verify-full)');
    expect(connectionError({ ...config, ssl: { rejectUnauthorized: true } }, hba).message).not.toContain('turn it on');
  });

  it('an untrusted server certificate: DB_TLS_FAILED pointing at database.sslRootCert', () => {
    const error = connectionError({ ...config, ssl: { rejectUnauthorized: true } }, tlsSocketError('SELF_SIGNED_CERT_IN_CHAIN'));
    expect(error.code).toBe('DB_TLS_FAILED');
    expect(error.message).toContain('OUTBOX_DB_SSL_ROOT_CERT');
  });

  it('a refused connection stays DB_UNAVAILABLE (retriable)', () => {
    const error = connectionError(config, Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:5432'), { code: 'ECONNREFUSED' }));
    expect([error.code, error.retriable]).toEqual(['DB_UNAVAILABLE', true]);
  });
});

describe('Kafka Connect REST and the schema registry (HTTP)', () => {
  it('401 → *_AUTH_FAILED, 403 → *_ACCESS_DENIED, naming the user; an axios TLS error → *_TLS_FAILED', () => {
    const connect = { hop: 'connect' as const, target: 'https://connect:8483', principal: 'deployer' };
    expect(credentialFailure(axiosError(401), connect)?.code).toBe('CONNECT_AUTH_FAILED');
    expect(credentialFailure(axiosError(401), connect)?.message).toContain('OUTBOX_CONNECT_PASSWORD');
    expect(credentialFailure(axiosError(403), connect)?.code).toBe('CONNECT_ACCESS_DENIED');
    const tls = new AxiosError('self-signed certificate in certificate chain', 'SELF_SIGNED_CERT_IN_CHAIN');
    expect(credentialFailure(tls, connect)?.code).toBe('CONNECT_TLS_FAILED');
    expect(credentialFailure(tls, connect)?.message).toContain('OUTBOX_CONNECT_CA_FILE');
    const registry = { hop: 'registry' as const, target: 'https://registry:8485/apis/ccompat/v7', principal: 'router' };
    expect(credentialFailure(axiosError(401), registry)?.code).toBe('REGISTRY_AUTH_FAILED');
    expect(credentialFailure(axiosError(403), registry)?.code).toBe('REGISTRY_ACCESS_DENIED');
    expect(credentialFailure(Object.assign(new Error('x'), { code: 'CERT_HAS_EXPIRED' }), registry)?.code).toBe('REGISTRY_TLS_FAILED');
    expect(credentialFailure(axiosError(500), registry)).toBeUndefined();
  });

  it('http:// to a TLS port (Node\'s HTTP parser refuses the TLS alert it gets back): *_TLS_FAILED saying to use https; over https the same code is not TLS', () => {
    const parse = new AxiosError('Parse Error: Expected HTTP/', 'HPE_INVALID_CONSTANT');
    const plain = { hop: 'connect' as const, target: 'http://connect:8483', tls: false };
    expect(credentialFailure(parse, plain)?.code).toBe('CONNECT_TLS_FAILED');
    expect(credentialFailure(parse, plain)?.message).toContain('Use an https:// connect.url');
    expect(credentialFailure(parse, { ...plain, tls: true })).toBeUndefined();
  });
});

describe('helpers', () => {
  it('tlsErrorCode looks through causes and AggregateError', () => {
    expect(tlsErrorCode(new AggregateError([new Error('a'), tlsSocketError('CERT_HAS_EXPIRED')]))).toBe('CERT_HAS_EXPIRED');
    expect(tlsErrorCode(new Error('outer', { cause: tlsSocketError('ERR_TLS_CERT_ALTNAME_INVALID') }))).toBe('ERR_TLS_CERT_ALTNAME_INVALID');
    expect(tlsErrorCode(tlsSocketError('ECONNREFUSED'))).toBeUndefined();
  });

  it('isCredentialFailure: an OutboxError of a credential code, itself or as a cause; an already classified error is passed through', () => {
    const refused = new OutboxError('KAFKA_ACL_DENIED', 'denied', { retriable: true });
    expect(isCredentialFailure(refused)).toBe(true);
    expect(isCredentialFailure(new Error('wrapped', { cause: refused }))).toBe(true);
    expect(isCredentialFailure(new OutboxError('DB_UNAVAILABLE', 'down'))).toBe(false);
    expect(credentialFailure(refused, { hop: 'kafka', target: 'x' })).toBe(refused);
  });
});
