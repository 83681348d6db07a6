import { OutboxError } from '../errors';

/**
 * Turns registry failures into the codec's error codes. Outages are retriable (the same call may work
 * later); a refused credential, a wrong base path or a rejected request are not, and their messages
 * name the setting to fix. Messages carry the URL without credentials.
 */

const NETWORK_FAILURE = /ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|EPIPE|socket hang up|timeout/i;

export function registryUnavailable(url: string, what: string, reason: string, cause?: unknown): OutboxError {
  return new OutboxError(
    'REGISTRY_UNAVAILABLE',
    `The schema registry at ${url} is unavailable while ${what}: ${reason}. Check that it runs (\`outbox stack status\`) and that ` +
      'the registry URL (OUTBOX_REGISTRY_URL or registry.url) is right; the call is safe to retry.',
    { retriable: true, cause, details: { url, reason } },
  );
}

/** An HTTP answer the caller did not expect. `body` is the registry's JSON error, if any. */
export function fromRegistryStatus(url: string, what: string, request: string, status: number, body: unknown, cause?: unknown): OutboxError {
  const message = errorMessage(body);
  if (status >= 500) return registryUnavailable(url, what, `HTTP ${status}${message ? ` (${message})` : ''}`, cause);
  if (status === 401 || status === 403) {
    return new OutboxError(
      'REGISTRY_REQUEST_FAILED',
      `The schema registry at ${url} refused the credentials while ${what} (HTTP ${status}). Set OUTBOX_REGISTRY_USERNAME and ` +
        'OUTBOX_REGISTRY_PASSWORD (or registry.username / registry.password in the config file).',
      { cause, details: { url, status } },
    );
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
 * @kafkajs/confluent-schema-registry reports a connection failure as a ResponseError with *status 400*
 * and the socket error in the message (mappersmith's convention), so that case is recognised by text.
 */
export function fromClientError(url: string, what: string, request: string, error: unknown): OutboxError {
  const status = (error as { status?: unknown })?.status;
  const text = (error as Error)?.message ?? String(error);
  if (typeof status !== 'number') {
    return new OutboxError('REGISTRY_REQUEST_FAILED', `The schema registry client failed while ${what}: ${text}.`, { cause: error, details: { url } });
  }
  if (status === 400 && NETWORK_FAILURE.test(text)) return registryUnavailable(url, what, text.replace(/^.* - /, ''), error);
  return fromRegistryStatus(url, what, request, status, { message: text.replace(/^.* - /, '') }, error);
}

export function errorCode(body: unknown): number | undefined {
  const code = (body as { error_code?: unknown } | undefined)?.error_code;
  return typeof code === 'number' ? code : undefined;
}

function errorMessage(body: unknown): string | undefined {
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
