/**
 * A token for Kafka's OAuthBearerUnsecuredValidatorCallbackHandler, the broker-side validator Kafka
 * ships for development: it accepts an unsigned JWS (`alg: none`) and takes the principal from `sub`.
 * ANYONE can mint one for ANY principal, so a listener that accepts it has no authentication at all:
 * for tests and the local stack only, never production (use an identity provider's signed token there,
 * kafka.sasl.oauthbearer.tokenUrl). Set it as OUTBOX_KAFKA_SASL_OAUTHBEARER_TOKEN, or return it from a
 * provider.
 */
export interface UnsecuredJwsOptions {
  /** The Kafka principal (`User:<sub>` in ACLs). */
  principal: string;
  /** Seconds until it expires; default 3600. The broker refuses an expired token. */
  lifetimeSeconds?: number;
  /** The `scope` claim (space-separated), if the listener requires one. */
  scope?: string;
  /** Seconds since the epoch; default now. */
  issuedAt?: number;
}

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** `header.payload.` (an empty signature): an unsecured JWS with `sub`, `iat` and `exp`. */
export function unsecuredJwsForTestsOnly(options: UnsecuredJwsOptions): string {
  const iat = options.issuedAt ?? Math.floor(Date.now() / 1000);
  const payload = { sub: options.principal, iat, exp: iat + (options.lifetimeSeconds ?? 3600), ...(options.scope ? { scope: options.scope } : {}) };
  return `${base64url({ alg: 'none' })}.${base64url(payload)}.`;
}
