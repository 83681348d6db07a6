/**
 * OAUTHBEARER and MSK IAM in the configuration and in what createKafka hands kafkajs (no broker): the
 * token providers, their caching, the config's rules, redaction, and the unsecured JWS helper. The
 * token endpoint and the AWS signer are faked only to test the wiring and the cache.
 */
import { loadConfig } from '../../../src/config';
import { describeConfig } from '../../../src/config/describe';
import { loadConfigWithSources } from '../../../src/config/load';
import { OutboxError } from '../../../src/errors';
import { clientCredentialsProvider, kafkaConfig, mskIamProvider, TOKEN_REFRESH_MARGIN_MS, type MskIamSigner } from '../../../src/kafka';
import { unsecuredJwsForTestsOnly } from '../../../src/testing';

const thrown = (fn: () => unknown): OutboxError => {
  try {
    fn();
  } catch (error) {
    return error as OutboxError;
  }
  throw new Error('expected a throw');
};
const oauthProvider = (env: Record<string, string>) => {
  const sasl = kafkaConfig(loadConfig({ env })).sasl as { mechanism: string; oauthBearerProvider: () => Promise<{ value: string }> };
  expect(sasl.mechanism).toBe('oauthbearer');
  return sasl.oauthBearerProvider;
};

describe('kafka.sasl.mechanism=oauthbearer', () => {
  it('a static token from OUTBOX_KAFKA_SASL_OAUTHBEARER_TOKEN reaches kafkajs as its oauthBearerProvider', async () => {
    const provider = oauthProvider({ OUTBOX_KAFKA_SASL_MECHANISM: 'oauthbearer', OUTBOX_KAFKA_SASL_OAUTHBEARER_TOKEN: 'eyJ.static.' });
    await expect(provider()).resolves.toEqual({ value: 'eyJ.static.' });
  });

  it('a provider function given in code is used as it is, and every client of one config shares it', async () => {
    const provider = async () => ({ value: 'from-code' });
    const config = loadConfig({ env: {}, overrides: { kafka: { sasl: { mechanism: 'oauthbearer', oauthbearer: { provider } } } } });
    const first = kafkaConfig(config, { role: 'a' }).sasl as { oauthBearerProvider: unknown };
    const second = kafkaConfig(config, { role: 'b' }).sasl as { oauthBearerProvider: unknown };
    expect(first.oauthBearerProvider).toBe(provider);
    expect(second.oauthBearerProvider).toBe(provider);
  });

  it('refuses none or two token sources and a tokenUrl without its client; ignores another mechanism\'s settings', () => {
    const none = thrown(() => loadConfig({ env: { OUTBOX_KAFKA_SASL_MECHANISM: 'oauthbearer' } }));
    expect(none.code).toBe('CONFIG_INVALID');
    expect(none.message).toContain('takes exactly one of token (OUTBOX_KAFKA_SASL_OAUTHBEARER_TOKEN)');
    const half = thrown(() => loadConfig({ env: { OUTBOX_KAFKA_SASL_MECHANISM: 'oauthbearer', OUTBOX_KAFKA_SASL_OAUTHBEARER_TOKEN_URL: 'https://idp/token', OUTBOX_KAFKA_SASL_OAUTHBEARER_CLIENT_ID: 'router' } }));
    expect(half.message).toContain('tokenUrl needs clientId and clientSecret');
    // Another mechanism's settings may stay set, unused: switching is one variable.
    const scram = kafkaConfig(loadConfig({ env: { OUTBOX_KAFKA_SASL_MECHANISM: 'scram-sha-512', OUTBOX_KAFKA_SASL_USERNAME: 'u', OUTBOX_KAFKA_SASL_PASSWORD: 'p', OUTBOX_KAFKA_SASL_OAUTHBEARER_TOKEN: 't' } })).sasl;
    expect(scram).toEqual({ mechanism: 'scram-sha-512', username: 'u', password: 'p' });
    expect(thrown(() => loadConfig({ env: { OUTBOX_KAFKA_SASL_USERNAME: 'u', OUTBOX_KAFKA_SASL_PASSWORD: 'p' } })).message).toContain('username and password need a mechanism');
  });

  it('the token and the client secret are redacted from `outbox config`, the token URL and client id are not', () => {
    const loaded = loadConfigWithSources({
      env: {
        OUTBOX_KAFKA_SASL_MECHANISM: 'oauthbearer',
        OUTBOX_KAFKA_SASL_OAUTHBEARER_TOKEN_URL: 'https://idp.example/oauth2/token',
        OUTBOX_KAFKA_SASL_OAUTHBEARER_CLIENT_ID: 'router-client',
        OUTBOX_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET: 'client-secret-value',
      },
    });
    const shown = Object.fromEntries(describeConfig(loaded).map((s) => [s.path, s.value]));
    expect(shown['kafka.sasl.oauthbearer.tokenUrl']).toBe('https://idp.example/oauth2/token');
    expect(shown['kafka.sasl.oauthbearer.clientId']).toBe('router-client');
    expect(shown['kafka.sasl.oauthbearer.clientSecret']).toBe('[redacted]');
    expect(JSON.stringify(shown)).not.toContain('client-secret-value');
  });
});

describe('clientCredentialsProvider (OIDC client-credentials grant)', () => {
  const answer = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

  it('posts the grant with basic client auth and scope, then reuses the token until shortly before it expires', async () => {
    let clock = 1_000_000;
    const requests: Array<{ url: string; init: RequestInit }> = [];
    let n = 0;
    const fetchFn = (async (url: string, init: RequestInit) => {
      requests.push({ url, init });
      return answer(200, { access_token: `token-${++n}`, token_type: 'Bearer', expires_in: 300 });
    }) as unknown as typeof fetch;
    const provider = clientCredentialsProvider({ tokenUrl: 'https://idp/token', clientId: 'router', clientSecret: 'shh', scope: 'kafka', fetch: fetchFn, now: () => clock });
    const [a, b] = await Promise.all([provider(), provider()]);
    expect([a, b]).toEqual([{ value: 'token-1' }, { value: 'token-1' }]);
    expect(requests).toHaveLength(1);
    expect(requests[0]?.url).toBe('https://idp/token');
    expect(String(requests[0]?.init.body)).toBe('grant_type=client_credentials&scope=kafka');
    expect((requests[0]?.init.headers as Record<string, string>).authorization).toBe(`Basic ${Buffer.from('router:shh').toString('base64')}`);
    clock += 300_000 - TOKEN_REFRESH_MARGIN_MS - 1;
    expect(await provider()).toEqual({ value: 'token-1' });
    clock += 2;
    expect(await provider()).toEqual({ value: 'token-2' });
  });

  it('a refusal is KAFKA_AUTH_FAILED naming the endpoint, the client id and the IdP error, never the secret', async () => {
    const fetchFn = (async () => answer(401, { error: 'invalid_client', error_description: 'bad secret' })) as unknown as typeof fetch;
    const provider = clientCredentialsProvider({ tokenUrl: 'https://idp/token', clientId: 'router', clientSecret: 'shh-secret', fetch: fetchFn });
    const error = (await provider().catch((e: unknown) => e)) as OutboxError;
    expect(error.code).toBe('KAFKA_AUTH_FAILED');
    expect(error.message).toContain('https://idp/token');
    expect(error.message).toContain('"router"');
    expect(error.message).toContain('HTTP 401 invalid_client (bad secret)');
    expect(error.message).not.toContain('shh-secret');
  });
});

describe('kafka.sasl.mechanism=aws-msk-iam', () => {
  it('needs the region; kafkajs gets OAUTHBEARER with a provider', () => {
    expect(thrown(() => loadConfig({ env: { OUTBOX_KAFKA_SASL_MECHANISM: 'aws-msk-iam' } })).message).toContain('OUTBOX_KAFKA_SASL_AWS_REGION');
    const sasl = kafkaConfig(loadConfig({ env: { OUTBOX_KAFKA_SASL_MECHANISM: 'aws-msk-iam', OUTBOX_KAFKA_SASL_AWS_REGION: 'eu-west-1', OUTBOX_KAFKA_SSL: 'true' } })).sasl as { mechanism: string; oauthBearerProvider: unknown };
    expect(sasl.mechanism).toBe('oauthbearer');
    expect(typeof sasl.oauthBearerProvider).toBe('function');
  });

  it("asks the signer for the region's token and reuses it until a minute before its expiry", async () => {
    let clock = 0;
    const calls: unknown[] = [];
    const signer: MskIamSigner = { generateAuthToken: async (options) => (calls.push(options), { token: `signed-${calls.length}`, expiryTime: clock + 900_000 }) };
    const provider = mskIamProvider('eu-west-1', async () => signer, () => clock);
    expect(await provider()).toEqual({ value: 'signed-1' });
    expect(await provider()).toEqual({ value: 'signed-1' });
    expect(calls).toEqual([{ region: 'eu-west-1' }]);
    clock = 900_000 - TOKEN_REFRESH_MARGIN_MS;
    expect(await provider()).toEqual({ value: 'signed-2' });
  });

  it('without the optional package: KAFKA_IAM_SIGNER_MISSING saying what to install', async () => {
    const missing = Object.assign(new Error("Cannot find module 'aws-msk-iam-sasl-signer-js'"), { code: 'MODULE_NOT_FOUND' });
    const error = (await mskIamProvider('eu-west-1', () => Promise.reject(missing))().catch((e: unknown) => e)) as OutboxError;
    expect(error.code).toBe('KAFKA_IAM_SIGNER_MISSING');
    expect(error.message).toContain('npm install aws-msk-iam-sasl-signer-js');
    // The real loader, here where the package is not installed.
    const real = (await mskIamProvider('eu-west-1')().catch((e: unknown) => e)) as OutboxError;
    expect(real.code).toBe('KAFKA_IAM_SIGNER_MISSING');
  });
});

describe('unsecuredJwsForTestsOnly', () => {
  it('is an alg=none JWS with sub, iat and exp (and scope when given), with an empty signature', () => {
    const token = unsecuredJwsForTestsOnly({ principal: 'outbox-router', lifetimeSeconds: 60, issuedAt: 1_700_000_000, scope: 'kafka' });
    const [header, payload, signature] = token.split('.');
    expect(JSON.parse(Buffer.from(header as string, 'base64url').toString())).toEqual({ alg: 'none' });
    expect(JSON.parse(Buffer.from(payload as string, 'base64url').toString())).toEqual({ sub: 'outbox-router', iat: 1_700_000_000, exp: 1_700_000_060, scope: 'kafka' });
    expect(signature).toBe('');
  });
});
