/**
 * Redaction, in one place: what counts as a secret and how it is hidden in logs, CLI output, error
 * messages and stored connector configs (docs/security.md). Callers still never build messages out of
 * secrets; these are the nets under that rule.
 */

export const REDACTED = '[redacted]';

/**
 * Keys whose values are secrets, in configs, connector properties and logged objects. A token
 * endpoint's URL (`tokenUrl`, `TOKEN_URL`) is where a token is fetched, not one: it stays readable.
 */
export const SECRET_KEY = /password|secret|token(?![-_.]?url)/i;

/**
 * The same for pino: keys whose values it replaces before anything is written (createLogger).
 */
export const REDACTED_PATHS = [
  'password',
  '*.password',
  'secret',
  '*.secret',
  'connectionString',
  '*.connectionString',
  'headers.authorization',
  '*.headers.authorization',
];

export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key);
}

/** `scheme://user:password@host` → `scheme://[redacted]@host`, for every URL in the text. */
export function redactUrl(text: string): string {
  return text.replace(/(\/\/)[^/@\s"]*@/g, `$1${REDACTED}@`);
}

/** `https://hooks.slack.com/services/T/B/x?k=v` → `https://hooks.slack.com`: paths and queries carry tokens too. */
export function urlOrigin(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}`;
  } catch {
    return '(invalid URL)';
  }
}

/**
 * A value as it may be shown under its key: a secret key's value is redacted unless `shown(value)`
 * says it is not a secret itself (a connector's `${env:NAME}` config-provider reference names where
 * the secret lives).
 */
export function redactValue(key: string, value: string, shown: (value: string) => boolean = () => false): string {
  if (!isSecretKey(key)) return value;
  return shown(value) ? value : REDACTED;
}

/** A copy safe to print or log: every secret-keyed value replaced at any depth, and credentials inside URLs. */
export function redactSecrets<T>(value: T): T {
  if (typeof value === 'string') return redactUrl(value) as T;
  if (Array.isArray(value)) return value.map(redactSecrets) as T;
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, isSecretKey(k) && v !== undefined ? REDACTED : redactSecrets(v)])) as T;
  }
  return value;
}

/**
 * An axios error carries the basic-auth credentials twice: `config.auth` and, inside the raw
 * `request`, the Authorization header. Kept as an OutboxError's `cause`, a logger that serializes the
 * cause (pino's err serializer copies enumerable properties) would print them. Removes both, in place.
 */
export function scrubHttpError<E>(error: E): E {
  const e = error as { config?: { auth?: unknown; headers?: Record<string, unknown> }; request?: unknown; response?: { config?: unknown; request?: unknown } } | null;
  if (!e || typeof e !== 'object') return error;
  const hide = (owner: object, key: string) => {
    if (Object.hasOwn(owner, key)) Object.defineProperty(owner, key, { enumerable: false, value: undefined, writable: true, configurable: true });
  };
  for (const config of [e.config, e.response?.config] as Array<{ auth?: unknown; headers?: Record<string, unknown> } | undefined>) {
    if (!config || typeof config !== 'object') continue;
    if (config.auth !== undefined) config.auth = REDACTED;
    for (const key of Object.keys(config.headers ?? {})) if (/^(authorization|proxy-authorization)$/i.test(key) && config.headers) config.headers[key] = REDACTED;
  }
  hide(e, 'request');
  if (e.response && typeof e.response === 'object') hide(e.response, 'request');
  return error;
}
