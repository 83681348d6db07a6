import type { OAuthBearerProvider, OutboxConfig } from '../config';
import { OutboxError } from '../errors';

/**
 * Token providers for kafkajs's OAUTHBEARER mechanism (`sasl.oauthBearerProvider`), from
 * `kafka.sasl.oauthbearer` or `kafka.sasl.aws`: a fixed token, an OIDC client-credentials grant, a
 * function from code, or AWS's MSK IAM signer. kafkajs calls the provider each time it authenticates a
 * connection, and leaves reuse and refresh to it.
 */

type OAuthBearerSettings = OutboxConfig['kafka']['sasl']['oauthbearer'];
type SaslSettings = Omit<OutboxConfig['kafka']['sasl'], 'oauthbearer' | 'aws'> & Partial<Pick<OutboxConfig['kafka']['sasl'], 'oauthbearer' | 'aws'>>;

/** A fetched token is renewed this long before it expires (a token living less than twice this: at half its life). */
export const TOKEN_REFRESH_MARGIN_MS = 60_000;

export interface ClientCredentialsOptions {
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
  scope?: string;
  /** Tests: the HTTP call (default: global fetch). */
  fetch?: typeof fetch;
  now?: () => number;
  /** Per request; default 10 s. */
  timeoutMs?: number;
}

/**
 * An OIDC client-credentials grant (RFC 6749 §4.4) against `tokenUrl`, the client authenticated with
 * HTTP basic auth (client_secret_basic, as Kafka's own OAuth login handler does). The token is cached
 * until TOKEN_REFRESH_MARGIN_MS before its `expires_in`; one request is shared by concurrent callers.
 */
export function clientCredentialsProvider(options: ClientCredentialsOptions): OAuthBearerProvider {
  const fetchFn = options.fetch ?? fetch;
  const now = options.now ?? Date.now;
  let cached: { value: string; renewAt: number } | undefined;
  let pending: Promise<{ value: string }> | undefined;
  const refused = (why: string, cause?: unknown) =>
    new OutboxError(
      'KAFKA_AUTH_FAILED',
      `The OAuth token endpoint ${options.tokenUrl} gave no token to client ${JSON.stringify(options.clientId)}: ${why}. Check kafka.sasl.oauthbearer.tokenUrl, clientId and ` +
        'clientSecret (OUTBOX_KAFKA_SASL_OAUTHBEARER_TOKEN_URL, _CLIENT_ID, _CLIENT_SECRET) and that the identity provider allows the client-credentials grant for that client.',
      { retriable: true, cause, details: { hop: 'kafka', kind: 'auth', target: options.tokenUrl, principal: options.clientId } },
    );

  async function fetchToken(): Promise<{ value: string }> {
    const body = new URLSearchParams({ grant_type: 'client_credentials', ...(options.scope ? { scope: options.scope } : {}) });
    const basic = Buffer.from(`${encodeURIComponent(options.clientId)}:${encodeURIComponent(options.clientSecret)}`).toString('base64');
    let response: Response;
    try {
      response = await fetchFn(options.tokenUrl, {
        method: 'POST',
        headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: body.toString(),
        signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
      });
    } catch (error) {
      throw refused(`the request failed (${(error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name})`, error);
    }
    const text = await response.text();
    let json: { access_token?: unknown; expires_in?: unknown; error?: unknown; error_description?: unknown } = {};
    try {
      json = JSON.parse(text) as typeof json;
    } catch {
      // Not JSON: the status says enough.
    }
    if (!response.ok || typeof json.access_token !== 'string') {
      const reason = typeof json.error === 'string' ? ` ${json.error}${typeof json.error_description === 'string' ? ` (${json.error_description})` : ''}` : '';
      throw refused(response.ok ? 'the answer has no access_token' : `HTTP ${response.status}${reason}`);
    }
    const lifetimeMs = typeof json.expires_in === 'number' && json.expires_in > 0 ? json.expires_in * 1000 : 300_000;
    cached = { value: json.access_token, renewAt: now() + Math.max(lifetimeMs - TOKEN_REFRESH_MARGIN_MS, lifetimeMs / 2) };
    return { value: json.access_token };
  }

  return async () => {
    if (cached && now() < cached.renewAt) return { value: cached.value };
    pending ??= fetchToken().finally(() => (pending = undefined));
    return pending;
  };
}

/** The module AWS publishes for MSK IAM over OAUTHBEARER: only what is used of it. */
export interface MskIamSigner {
  generateAuthToken(options: { region: string }): Promise<{ token: string; expiryTime: number }>;
}

/** The optional peer dependency that signs MSK IAM tokens. */
export const MSK_IAM_SIGNER_PACKAGE = 'aws-msk-iam-sasl-signer-js';

async function importSigner(): Promise<MskIamSigner> {
  // A variable specifier: the package is an optional peer, not installed unless the user wants MSK IAM.
  const name: string = MSK_IAM_SIGNER_PACKAGE;
  return (await import(name)) as MskIamSigner;
}

/**
 * MSK IAM: a token signed by `aws-msk-iam-sasl-signer-js` with the AWS SDK's default credentials
 * (environment, profile, instance or task role), sent over OAUTHBEARER, as AWS documents for kafkajs.
 * The signer is loaded at the first authentication, so a config that never uses it never needs it;
 * the token is reused until a minute before its expiry. Not verified against MSK here (docs/security.md).
 */
export function mskIamProvider(region: string, load: () => Promise<MskIamSigner> = importSigner, now: () => number = Date.now): OAuthBearerProvider {
  let cached: { value: string; renewAt: number } | undefined;
  return async () => {
    if (cached && now() < cached.renewAt) return { value: cached.value };
    let signer: MskIamSigner;
    try {
      signer = await load();
    } catch (error) {
      throw new OutboxError(
        'KAFKA_IAM_SIGNER_MISSING',
        `kafka.sasl.mechanism is aws-msk-iam, but the package ${MSK_IAM_SIGNER_PACKAGE} cannot be loaded (${(error as { code?: string }).code ?? (error as Error).message}). ` +
          `Install it beside outbox-router (npm install ${MSK_IAM_SIGNER_PACKAGE}), or choose another mechanism.`,
        { cause: error },
      );
    }
    const { token, expiryTime } = await signer.generateAuthToken({ region });
    cached = { value: token, renewAt: Math.max(expiryTime - TOKEN_REFRESH_MARGIN_MS, now() + (expiryTime - now()) / 2) };
    return { value: token };
  };
}

/** A fixed token (Kafka's unsecured JWS validator in tests, or a long-lived token from a secret store). */
export function staticTokenProvider(token: string): OAuthBearerProvider {
  return () => Promise.resolve({ value: token });
}

/** One provider per configuration, so the clients of one process (router, producer, admin) share a cached token. */
const providers = new WeakMap<object, OAuthBearerProvider>();

/** The provider `kafka.sasl` configures, or undefined for a mechanism without one. */
export function configuredOAuthBearerProvider(sasl: SaslSettings | undefined): OAuthBearerProvider | undefined {
  if (!sasl) return undefined;
  const known = providers.get(sasl);
  if (known) return known;
  const made = makeProvider(sasl);
  if (made) providers.set(sasl, made);
  return made;
}

function makeProvider(sasl: SaslSettings): OAuthBearerProvider | undefined {
  if (sasl.mechanism === 'aws-msk-iam' && sasl.aws?.region) return mskIamProvider(sasl.aws.region);
  if (sasl.mechanism !== 'oauthbearer' || !sasl.oauthbearer) return undefined;
  const o: OAuthBearerSettings = sasl.oauthbearer;
  if (o.provider) return o.provider;
  if (o.token !== undefined) return staticTokenProvider(o.token);
  if (o.tokenUrl !== undefined && o.clientId !== undefined && o.clientSecret !== undefined) {
    return clientCredentialsProvider({ tokenUrl: o.tokenUrl, clientId: o.clientId, clientSecret: o.clientSecret, ...(o.scope ? { scope: o.scope } : {}) });
  }
  return undefined;
}
