import { OutboxError } from '../errors';
import { credentialFailure } from '../errors/credentials';

/**
 * Turns registry failures into the codec's error codes. Outages, rate limits (429) and refused
 * credentials (401/403) are retriable: none of them says anything about the record being decoded, so
 * the router waits instead of dead-lettering (a credential or ACL fixed on the registry side heals it).
 * A wrong base path or a rejected request are not retriable here; the decode path marks them so (see
 * fetchWriterType). Messages name the setting to fix and carry the URL without credentials.
 */

const NETWORK_FAILURE = /ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|EPIPE|socket hang up|timeout/i;

export function registryUnavailable(url: string, what: string, reason: string, cause?: unknown, username?: string): OutboxError {
  const refused = cause === undefined ? undefined : credentialFailure(cause, { hop: 'registry', target: url, tls: url.startsWith('https:'), ...(username ? { principal: username } : {}) }, what);
  if (refused) return refused;
  return new OutboxError(
    'REGISTRY_UNAVAILABLE',
    `The schema registry at ${url} is unavailable while ${what}: ${reason}. Check that it runs (\`outbox stack status\`) and that ` +
      'the registry URL (OUTBOX_REGISTRY_URL or registry.url) is right; the call is safe to retry.',
    { retriable: true, cause, details: { url, reason } },
  );
}

/** An HTTP answer the caller did not expect. `body` is the registry's JSON error, if any. */
export function fromRegistryStatus(url: string, what: string, request: string, status: number, body: unknown, cause?: unknown, username?: string): OutboxError {
  const message = errorMessage(body);
  if (status >= 500 || status === 429) {
    return registryUnavailable(url, what, `HTTP ${status}${status === 429 ? ' (rate limited)' : ''}${message ? ` (${message})` : ''}`, cause);
  }
  if (status === 401 || status === 403) {
    // 401: the credentials are wrong (REGISTRY_AUTH_FAILED); 403: the user lacks the right (REGISTRY_ACCESS_DENIED).
    // Retriable: a registry problem, never the record's, so the router waits for the fix.
    const refused = credentialFailure({ status }, { hop: 'registry', target: url, ...(username ? { principal: username } : {}) }, what) as OutboxError;
    return new OutboxError(refused.code, refused.message, { retriable: true, cause, details: { ...refused.details, url, status } });
  }
  // The Confluent API answers 404 with an error_code (40401 subject, 40402 version, 40403 schema);
  // a 404 without one comes from a server that is not that API: almost always a wrong base path.
  if (status === 404 && errorCode(body) === undefined) {
    return new OutboxError(
      'REGISTRY_REQUEST_FAILED',
      `The schema registry URL ${url} answered HTTP 404 to ${request} while ${what}: it does not look like a Confluent-compatible API. ` +
        'Point OUTBOX_REGISTRY_URL at its base path; for Apicurio that is e.g. http://127.0.0.1:8081/apis/ccompat/v7.',
      { cause, details: { url, status, request } },
    );
  }
  return new OutboxError(
    'REGISTRY_REQUEST_FAILED',
    `The schema registry at ${url} rejected ${request} while ${what}: HTTP ${status}${message ? ` ${message}` : ''}.`,
    { cause, details: { url, status, request, errorCode: errorCode(body) } },
  );
}

/**
 * Fetching a record's writer schema (`GET /schemas/ids/{id}`) answered neither 200 nor "no such id".
 * Always retriable, even a wrong base path or a rejected request: it is a registry problem, not the
 * record's, so the router waits for the fix instead of dead-lettering every Avro record.
 */
export function writerSchemaFailure(url: string, id: number, status: number, body: unknown, username?: string): OutboxError {
  const error = fromRegistryStatus(url, `fetching schema id ${id}`, `GET /schemas/ids/${id}`, status, body, undefined, username);
  return error.retriable ? error : new OutboxError(error.code, error.message, { retriable: true, details: { ...error.details } });
}

/**
 * @kafkajs/confluent-schema-registry reports a connection failure as a ResponseError with *status 400*
 * and the socket error in the message (mappersmith's convention), so that case is recognised by text.
 */
export function fromClientError(url: string, what: string, request: string, error: unknown, username?: string): OutboxError {
  const status = (error as { status?: unknown })?.status;
  const text = (error as Error)?.message ?? String(error);
  if (typeof status !== 'number') {
    return new OutboxError('REGISTRY_REQUEST_FAILED', `The schema registry client failed while ${what}: ${text}.`, { cause: error, details: { url } });
  }
  if (status === 400 && NETWORK_FAILURE.test(text)) return registryUnavailable(url, what, text.replace(/^.* - /, ''), error, username);
  return fromRegistryStatus(url, what, request, status, { message: text.replace(/^.* - /, '') }, error, username);
}

export function errorCode(body: unknown): number | undefined {
  const code = (body as { error_code?: unknown } | undefined)?.error_code;
  return typeof code === 'number' ? code : undefined;
}

/**
 * The registry's JSON `message`; else, for a body that is text or HTML (a proxy's own error page, e.g.
 * nginx's "The plain HTTP request was sent to HTTPS port"), its first words without markup.
 */
function errorMessage(body: unknown): string | undefined {
  if (typeof body === 'string') {
    const text = (/<title>([^<]*)<\/title>/i.exec(body)?.[1] ?? body.replace(/<[^>]*>/g, ' ')).replace(/\s+/g, ' ').trim();
    const heading = /<h1>([^<]*)<\/h1>/i.exec(body)?.[1]?.trim();
    const said = heading && heading !== text ? `${text}: ${heading}` : text;
    return said ? `(${said.slice(0, 160)})` : undefined;
  }
  const message = (body as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' ? message : undefined;
}

/** `http://user:secret@host/path` → the URL without user info, and the credentials it carried. */
export function splitCredentials(url: string): { url: string; username?: string; password?: string } {
  try {
    const parsed = new URL(url);
    if (!parsed.username && !parsed.password) return { url: url.replace(/\/+$/, '') };
    const username = decodeURIComponent(parsed.username) || undefined;
    const password = decodeURIComponent(parsed.password) || undefined;
    parsed.username = '';
    parsed.password = '';
    return { url: parsed.toString().replace(/\/+$/, ''), username, password };
  } catch {
    return { url: url.replace(/\/+$/, '') };
  }
}
