import { OutboxError, isOutboxError, type ErrorCode } from './index';
import { CREDENTIAL_ERROR_CODES } from './credential-codes';

/**
 * Connections refused over a credential or a certificate, told apart from outages, in one place: for
 * each hop (Kafka brokers, Kafka Connect REST, schema registry, PostgreSQL) and kind (authentication,
 * authorization, TLS) one error code whose message names the hop, the principal (never its secret) and
 * the setting to fix. The wrapping points (src/db, src/connector/connect-client.ts,
 * src/codec/registry-errors.ts, src/kafka, the router) call these. Branches on the libraries' error
 * classes and codes (kafkajs error names and protocol types, SQLSTATEs, Node's TLS codes, HTTP status),
 * never on message text.
 */

export type Hop = 'kafka' | 'postgres' | 'connect' | 'registry';
export type CredentialFailureKind = 'auth' | 'acl' | 'tls';

/** Where the failed connection went and as whom. */
export interface HopTarget {
  hop: Hop;
  /** host:port, a URL without credentials, or a broker list. */
  target: string;
  /** The user, SASL username or OAuth client id: never a password. */
  principal?: string;
  /** Whether the client spoke TLS: a closed connection from a TLS-only port then means "turn TLS on". */
  tls?: boolean;
  /** Kafka with OAUTHBEARER: a connection the broker drops right after authenticating means the token was refused. */
  oauthbearer?: boolean;
}

const HOP_NAMES: Record<Hop, string> = {
  kafka: 'the Kafka brokers',
  postgres: 'PostgreSQL',
  connect: 'Kafka Connect REST',
  registry: 'the schema registry',
};

/** Where each hop's credential and TLS settings live (docs/configuration.md). */
const SETTINGS: Record<Hop, { credentials: string; ca: string; tls: string }> = {
  kafka: {
    credentials: 'kafka.sasl (OUTBOX_KAFKA_SASL_MECHANISM with OUTBOX_KAFKA_SASL_USERNAME / OUTBOX_KAFKA_SASL_PASSWORD, or the OAUTHBEARER settings)',
    ca: 'kafka.ssl.caFile (OUTBOX_KAFKA_SSL_CA_FILE)',
    tls: 'kafka.ssl.enabled (OUTBOX_KAFKA_SSL)',
  },
  postgres: { credentials: 'PGUSER / PGPASSWORD (database.user / database.password)', ca: 'database.sslRootCert (OUTBOX_DB_SSL_ROOT_CERT)', tls: 'database.sslMode (OUTBOX_DB_SSL_MODE=verify-full)' },
  connect: { credentials: 'OUTBOX_CONNECT_USERNAME / OUTBOX_CONNECT_PASSWORD (connect.username / connect.password)', ca: 'connect.caFile (OUTBOX_CONNECT_CA_FILE)', tls: 'an https:// connect.url (OUTBOX_CONNECT_URL)' },
  registry: { credentials: 'OUTBOX_REGISTRY_USERNAME / OUTBOX_REGISTRY_PASSWORD (registry.username / registry.password)', ca: 'registry.caFile (OUTBOX_REGISTRY_CA_FILE)', tls: 'an https:// registry.url (OUTBOX_REGISTRY_URL)' },
};

const CODES: Record<Hop, Record<CredentialFailureKind, ErrorCode>> = {
  kafka: { auth: 'KAFKA_AUTH_FAILED', acl: 'KAFKA_ACL_DENIED', tls: 'KAFKA_TLS_FAILED' },
  postgres: { auth: 'DB_AUTH_FAILED', acl: 'DB_AUTH_FAILED', tls: 'DB_TLS_FAILED' },
  connect: { auth: 'CONNECT_AUTH_FAILED', acl: 'CONNECT_ACCESS_DENIED', tls: 'CONNECT_TLS_FAILED' },
  registry: { auth: 'REGISTRY_AUTH_FAILED', acl: 'REGISTRY_ACCESS_DENIED', tls: 'REGISTRY_TLS_FAILED' },
};

/** Node's codes for a server certificate that was not accepted (node:tls, OpenSSL's verify results). */
const CERT_EXPIRED = new Set(['CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID']);
const CERT_NAME = new Set(['ERR_TLS_CERT_ALTNAME_INVALID', 'HOSTNAME_MISMATCH']);
const CERT_UNTRUSTED = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_REVOKED',
  'CERT_SIGNATURE_FAILURE',
  'INVALID_CA',
]);
/** TLS spoken to a port that does not speak it (OpenSSL reads the plain-text answer as a bad record). */
const NOT_TLS = new Set(['ERR_SSL_WRONG_VERSION_NUMBER', 'ERR_SSL_PACKET_LENGTH_TOO_LONG', 'ERR_SSL_HTTP_REQUEST', 'EPROTO']);

/** kafkajs protocol error types meaning "this principal may not" (its ACLs). */
const KAFKA_ACL_TYPES = new Set(['TOPIC_AUTHORIZATION_FAILED', 'GROUP_AUTHORIZATION_FAILED', 'CLUSTER_AUTHORIZATION_FAILED', 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED', 'DELEGATION_TOKEN_AUTHORIZATION_FAILED']);

/** The error and its causes (kafkajs wraps the real failure in KafkaJSNumberOfRetriesExceeded; AggregateError lists several). */
function chain(error: unknown): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  const visit = (e: unknown, depth: number) => {
    if (!e || typeof e !== 'object' || depth > 8 || out.includes(e as Record<string, unknown>)) return;
    const node = e as Record<string, unknown>;
    out.push(node);
    visit(node.cause, depth + 1);
    visit(node.originalError, depth + 1);
    if (Array.isArray(node.errors)) for (const inner of node.errors) visit(inner, depth + 1);
  };
  visit(error, 0);
  return out;
}

/** A Node TLS or OpenSSL error code anywhere in the chain, if any. */
export function tlsErrorCode(error: unknown): string | undefined {
  for (const node of chain(error)) {
    const code = node.code;
    if (typeof code !== 'string') continue;
    if (CERT_EXPIRED.has(code) || CERT_NAME.has(code) || CERT_UNTRUSTED.has(code) || NOT_TLS.has(code) || /^ERR_(SSL|TLS)_/.test(code)) return code;
  }
  return undefined;
}

/** What kind of credential failure a library error is, if it is one, and the library's code for it. */
export function credentialFailureKind(error: unknown, target: Pick<HopTarget, 'hop' | 'tls' | 'oauthbearer'>): { kind: CredentialFailureKind; code: string } | undefined {
  const tls = tlsErrorCode(error);
  if (tls) return { kind: 'tls', code: tls };
  for (const node of chain(error)) {
    if (isOutboxError(node)) {
      const kind = kindOfCode(node.code);
      if (kind) return { kind, code: node.code };
      continue;
    }
    if (target.hop === 'kafka') {
      if (node.name === 'KafkaJSSASLAuthenticationError' || node.type === 'SASL_AUTHENTICATION_FAILED' || node.type === 'ILLEGAL_SASL_STATE') return { kind: 'auth', code: String(node.type ?? node.name) };
      if (typeof node.type === 'string' && KAFKA_ACL_TYPES.has(node.type)) return { kind: 'acl', code: node.type };
      // kafkajs 2.2.4 drops FindCoordinator's GROUP_AUTHORIZATION_FAILED and throws this instead once every
      // broker refused (a coordinator that is merely unavailable is retried, not reported so).
      if (node.name === 'KafkaJSGroupCoordinatorNotFound') return { kind: 'acl', code: 'GROUP_AUTHORIZATION_FAILED, reported by kafkajs as "Failed to find group coordinator"' };
      // A refused OAUTHBEARER token (expired, malformed, rejected by the validator): the broker answers with
      // RFC 7628's error challenge, which kafkajs 2.2.4 takes for success, then closes the connection; the
      // next request finds no broker. Measured on the secure stack (test/integration/secure-credentials.test.ts).
      if (target.oauthbearer && (node.name === 'KafkaJSBrokerNotFound' || node.name === 'KafkaJSConnectionClosedError')) {
        return { kind: 'auth', code: 'OAUTHBEARER token refused: the broker closed the connection after authentication' };
      }
      // Plain text to a TLS listener: the broker drops what it cannot read as a TLS handshake.
      if (target.tls === false && (node.name === 'KafkaJSConnectionClosedError' || node.code === 'ECONNRESET')) return { kind: 'tls', code: String(node.code ?? node.name) };
    } else if (target.hop === 'postgres') {
      // 28P01 invalid_password; 28000 invalid_authorization_specification (no pg_hba.conf entry: a missing
      // role, a refused address, or no encryption where the server takes hostssl only).
      if (node.code === '28P01' || node.code === '28000') return { kind: 'auth', code: node.code };
    } else {
      const status = (node.response as { status?: unknown } | undefined)?.status ?? node.status;
      // http:// to a TLS port: the answer is a TLS alert, which Node's HTTP parser refuses (HPE_…).
      if (target.tls === false && typeof node.code === 'string' && node.code.startsWith('HPE_')) return { kind: 'tls', code: node.code };
      if (status === 401) return { kind: 'auth', code: 'HTTP 401' };
      if (status === 403) return { kind: 'acl', code: 'HTTP 403' };
    }
  }
  return undefined;
}

function kindOfCode(code: ErrorCode): CredentialFailureKind | undefined {
  for (const hop of Object.keys(CODES) as Hop[]) {
    for (const kind of ['auth', 'acl', 'tls'] as const) if (CODES[hop][kind] === code) return kind;
  }
  return undefined;
}

/** Is this (or its cause) a connection refused over a credential, an ACL or TLS? Such a failure is never the record's. */
export function isCredentialFailure(error: unknown): boolean {
  return chain(error).some((node) => isOutboxError(node) && (CREDENTIAL_ERROR_CODES as readonly string[]).includes(node.code));
}

function tlsFix(hop: Hop, code: string, target: HopTarget): string {
  const s = SETTINGS[hop];
  if (CERT_EXPIRED.has(code)) return `The server's certificate has expired or is not valid yet (${code}): renew it on the server (the client's clock must be right too).`;
  if (CERT_NAME.has(code)) return `The certificate does not name ${target.target} (${code}): connect by a name the certificate lists, or reissue it with that name.`;
  if (NOT_TLS.has(code)) return `The port does not speak TLS (${code}): use the server's TLS port, or turn TLS off for a plain-text one (${s.tls}).`;
  if (code.startsWith('HPE_')) return `The server did not answer in HTTP (${code}): the port speaks TLS. Use ${s.tls}.`;
  if (code === 'KafkaJSConnectionClosedError' || code === 'ECONNRESET') {
    return `The server closed the connection before answering (${code}): a TLS-only port does that to plain text. Turn TLS on (${s.tls}), or check that the server runs.`;
  }
  return `The server's certificate is not trusted (${code}): set ${s.ca} to the PEM file of the CA that signed it.`;
}

/**
 * The one clear error for a connection refused over a credential, an ACL or TLS, or undefined when the
 * error is something else (an outage, a bug) and the caller keeps its own wrapping. Retriable: the fix
 * is on the other side (a password, an ACL, a certificate) and says nothing about the work in hand, so a
 * service waits for it instead of giving up on a record; a command reports it and exits.
 */
export function credentialFailure(error: unknown, target: HopTarget, what = 'connecting'): OutboxError | undefined {
  if (isCredentialFailure(error)) return error as OutboxError;
  const found = credentialFailureKind(error, target);
  if (!found) return undefined;
  const { hop } = target;
  const as = target.principal ? ` as ${JSON.stringify(target.principal)}` : '';
  const where = `${HOP_NAMES[hop]} at ${target.target}`;
  const s = SETTINGS[hop];
  const Hop = HOP_NAMES[hop].charAt(0).toUpperCase() + HOP_NAMES[hop].slice(1);
  let message: string;
  if (found.kind === 'tls') {
    message = `TLS to ${where} failed while ${what}. ${tlsFix(hop, found.code, target)}`;
  } else if (found.kind === 'auth') {
    const pgTls = hop === 'postgres' && found.code === '28000' && target.tls === false ? ` If the server accepts only TLS (hostssl), turn it on: ${s.tls}.` : '';
    const detail = hop === 'postgres' ? `: ${String((chain(error).find((n) => n.code === found.code)?.message as string | undefined) ?? found.code)}` : ` (${found.code})`;
    const check = target.oauthbearer
      ? 'Check the token source in kafka.sasl.oauthbearer (OUTBOX_KAFKA_SASL_OAUTHBEARER_TOKEN, or _TOKEN_URL with _CLIENT_ID and _CLIENT_SECRET; for aws-msk-iam the AWS credentials and OUTBOX_KAFKA_SASL_AWS_REGION), and that the listener accepts it: not expired, from the issuer and for the audience it expects.'
      : `Check ${s.credentials}, and that the server has that user with that password (a rotated password needs the new one here).`;
    message = `${Hop} at ${target.target} refused the credentials${as} while ${what}${detail}. ${check}${pgTls}`;
  } else if (hop === 'kafka') {
    message = `${Hop} at ${target.target} denied principal${as || ' (anonymous)'} while ${what} (${found.code}): it lacks an ACL. \`outbox kafka:acls\` prints the ACLs each part needs; grant them to that principal.`;
  } else {
    message = `${Hop} at ${target.target} refused${as || ' the request'} while ${what} (${found.code}): the user is known but lacks the right. Grant that user the access it needs on the server (read access for the router and status, write for deploys), or use a user that has it (${s.credentials}).`;
  }
  return new OutboxError(CODES[hop][found.kind], message, {
    retriable: true,
    cause: error,
    details: { hop, kind: found.kind, target: target.target, ...(target.principal ? { principal: target.principal } : {}), reason: found.code },
  });
}
