import { Agent as HttpsAgent } from 'node:https';
import axios, { type CreateAxiosDefaults } from 'axios';
import { readPemFile, type OutboxConfig } from '../config';
import { withoutUrlCredentials } from '../config/schema';
import { OutboxError, isOutboxError } from '../errors';
import { credentialFailure, type HopTarget } from '../errors/credentials';
import { scrubHttpError } from '../log/redact';
import { retry, type RetryOptions } from '../retry';

/** A small Kafka Connect REST client: every non-2xx becomes an OutboxError naming the status and Connect's message. */

export interface HttpRequest {
  method: 'GET' | 'PUT' | 'POST' | 'DELETE';
  path: string;
  query?: Record<string, string>;
  body?: unknown;
}
export interface HttpResponse {
  status: number;
  data: unknown;
}
/** The transport: resolves with any HTTP status, rejects only when no response came (network, timeout). */
export type HttpFn = (request: HttpRequest) => Promise<HttpResponse>;

/** `config.connect`; the TLS fields may be left out by code that builds settings by hand. */
export type ConnectSettings = Omit<OutboxConfig['connect'], 'rejectUnauthorized' | 'fallbackUrls'> & { rejectUnauthorized?: boolean; fallbackUrls?: readonly string[] };

export type ConnectorState = 'UNASSIGNED' | 'RUNNING' | 'PAUSED' | 'FAILED' | 'RESTARTING' | 'STOPPED';
export interface ConnectorStatusInfo {
  name: string;
  connector: { state: ConnectorState; worker_id: string; trace?: string };
  tasks: Array<{ id: number; state: ConnectorState; worker_id: string; trace?: string }>;
  type?: string;
}
export interface ConnectorOffset {
  partition: Record<string, unknown>;
  offset: Record<string, unknown>;
}
export interface FieldErrors {
  field: string;
  errors: string[];
}
export interface ValidationResult {
  errorCount: number;
  fields: FieldErrors[];
}

export interface ConnectClientOptions {
  http?: HttpFn;
  /** Retries of 409 Conflict (a rebalance or a stale leader); defaults fit a real worker. */
  retry?: Partial<RetryOptions>;
}

export const DEFAULT_CONFLICT_RETRY: RetryOptions = { attempts: 8, initialDelayMs: 250, maxDelayMs: 4_000, ceilingMs: 30_000 };

/**
 * The axios defaults for Connect's REST API: basic auth when connect.username is set (sent on every
 * request, also over plain http: use https where the network is not trusted), and for https an
 * agent with connect.caFile and connect.rejectUnauthorized. Exported so tests can look at it without
 * a network.
 */
export function connectAxiosConfig(settings: ConnectSettings): CreateAxiosDefaults {
  const https = settings.url.startsWith('https:');
  const agent =
    https && (settings.caFile !== undefined || settings.rejectUnauthorized === false)
      ? new HttpsAgent({
          ...(settings.caFile ? { ca: readPemFile(settings.caFile, 'connect.caFile (OUTBOX_CONNECT_CA_FILE)') } : {}),
          rejectUnauthorized: settings.rejectUnauthorized ?? true,
          keepAlive: true,
        })
      : undefined;
  return {
    baseURL: settings.url,
    timeout: settings.requestTimeoutMs,
    auth: settings.username ? { username: settings.username, password: settings.password ?? '' } : undefined,
    ...(agent ? { httpsAgent: agent } : {}),
    validateStatus: () => true,
    // axios would label a body-less PUT form-encoded; Connect answers that with 415.
    headers: { Accept: 'application/json', 'Content-Type': 'application/json' },
  };
}

/** `connect.url` first, then `connect.fallbackUrls`, without credentials in any (they travel as basic auth only). */
export function connectUrls(settings: ConnectSettings): string[] {
  const urls = [settings.url, ...(settings.fallbackUrls ?? [])].map((url) => withoutUrlCredentials({ url }).url.replace(/\/+$/, ''));
  return [...new Set(urls)];
}

/**
 * The axios transport. With fallback URLs it answers from the first worker that responds: a request that
 * got no response at all goes to the next URL, and the worker that answered is tried first next time, so
 * a dead worker costs one refused connection, not one per request. Any HTTP status is an answer and is
 * returned as it is (a 409 or 500 from a live worker is retried by the caller, never sent elsewhere).
 */
export function axiosHttp(settings: ConnectSettings): HttpFn {
  const instances = connectUrls(settings).map((url) => axios.create(connectAxiosConfig({ ...settings, url })));
  let first = 0;
  return async ({ method, path, query, body }) => {
    let lastError: unknown;
    for (let i = 0; i < instances.length; i++) {
      const index = (first + i) % instances.length;
      try {
        const response = await (instances[index] as (typeof instances)[number]).request({ method, url: path, params: query, data: body });
        first = index;
        return { status: response.status, data: response.data };
      } catch (error) {
        lastError = error;
      }
    }
    throw lastError;
  };
}

/** The Connect hop as credential errors name it: the URLs (no credentials) and the user. */
function connectTarget(settings: ConnectSettings): HopTarget {
  const urls = connectUrls(settings);
  return { hop: 'connect', target: urls.join(', '), tls: urls.every((u) => u.startsWith('https:')), ...(settings.username ? { principal: settings.username } : {}) };
}

const TIMEOUT_CODES = new Set(['ECONNABORTED', 'ETIMEDOUT', 'ERR_CANCELED']);

function unreachable(settings: ConnectSettings, request: HttpRequest, error: unknown): OutboxError {
  const code = (error as { code?: string })?.code ?? 'unknown';
  const what = TIMEOUT_CODES.has(code)
    ? `did not answer ${request.method} ${request.path} within ${settings.requestTimeoutMs} ms (connect.requestTimeoutMs)`
    : `is not reachable (${code}: ${(error as Error)?.message ?? String(error)})`;
  return new OutboxError(
    'CONNECT_UNREACHABLE',
    `Kafka Connect at ${connectUrls(settings).join(', ')} ${what}. Start the local stack with \`npm run stack:up\`, or set config.connect.url ` +
      '(OUTBOX_CONNECT_URL) to your Connect worker, and connect.fallbackUrls (OUTBOX_CONNECT_FALLBACK_URLS) to the other workers of its cluster.',
    { retriable: true, cause: error, details: { url: settings.url, code } },
  );
}

export function connectMessage(data: unknown): string {
  if (data && typeof data === 'object' && typeof (data as { message?: unknown }).message === 'string') return (data as { message: string }).message;
  if (typeof data === 'string' && data.trim()) return data.trim().slice(0, 500);
  return '(no message)';
}

function failed(settings: ConnectSettings, request: HttpRequest, response: HttpResponse): OutboxError {
  const message = connectMessage(response.data);
  const hint =
    response.status === 409
        ? ' Connect was rebalancing or busy; retry in a few seconds.'
        : response.status >= 500
          ? ` Check the Connect worker's log (\`npm run stack:logs -- connect\` for the local stack).`
          : '';
  return new OutboxError('CONNECT_REQUEST_FAILED', `Kafka Connect answered ${request.method} ${request.path} with ${response.status}: ${message}.${hint}`, {
    retriable: response.status === 409 || response.status >= 500,
    details: { status: response.status, method: request.method, path: request.path, connectMessage: message, url: settings.url },
  });
}

/** The HTTP status of a CONNECT_REQUEST_FAILED error, if it is one. */
export function connectStatus(error: unknown): number | undefined {
  return isOutboxError(error, 'CONNECT_REQUEST_FAILED') ? (error.details.status as number) : undefined;
}

export type ConnectClient = ReturnType<typeof createConnectClient>;

export function createConnectClient(given: ConnectSettings, options: ConnectClientOptions = {}) {
  // Settings built by hand may carry user:password in the URL; it must not reach messages.
  const settings = withoutUrlCredentials(given);
  const http = options.http ?? axiosHttp(settings);
  const retryOptions: RetryOptions = { ...DEFAULT_CONFLICT_RETRY, ...options.retry };
  const enc = encodeURIComponent;

  async function once(request: HttpRequest): Promise<HttpResponse> {
    let response: HttpResponse;
    try {
      response = await http(request);
    } catch (error) {
      scrubHttpError(error);
      throw credentialFailure(error, connectTarget(settings), `${request.method} ${request.path}`) ?? unreachable(settings, request, error);
    }
    if (response.status === 401 || response.status === 403) {
      throw credentialFailure({ status: response.status }, connectTarget(settings), `${request.method} ${request.path} (${connectMessage(response.data)})`) ?? failed(settings, request, response);
    }
    if (response.status < 200 || response.status > 299) throw failed(settings, request, response);
    return response;
  }

  /**
   * 409 means "not now" (rebalance, no leader yet, stale config) for requests the leader must serve:
   * retried. A read (GET) is also retried on a 5xx: during a rebalance a worker answers GET …/tasks
   * with 500 "Request cannot be completed because a rebalance is expected", and a read is safe to repeat.
   */
  async function request<T>(req: HttpRequest, { retryConflicts = true, allow404 = false } = {}): Promise<T | undefined> {
    const transient = (e: unknown) => {
      const status = connectStatus(e) ?? 0;
      return retryConflicts && (status === 409 || (req.method === 'GET' && status >= 500));
    };
    try {
      const response = await retry(() => once(req), { ...retryOptions, shouldRetry: transient });
      return response.data as T;
    } catch (error) {
      if (allow404 && connectStatus(error) === 404) return undefined;
      throw error;
    }
  }

  return {
    url: settings.url,
    /** `PUT /connector-plugins/PostgresConnector/config/validate`: the fields with errors (the connector opens a JDBC connection to check). */
    async validate(config: Readonly<Record<string, string>>): Promise<ValidationResult> {
      // Entries Connect has no value for come back with `value: null`.
      const data = await request<{ error_count: number; configs: Array<{ value: { name: string; errors?: string[] } | null }> }>({
        method: 'PUT',
        path: '/connector-plugins/PostgresConnector/config/validate',
        body: config,
      });
      const fields = (data?.configs ?? [])
        .flatMap((c) => (c.value && (c.value.errors ?? []).length > 0 ? [{ field: c.value.name, errors: c.value.errors as string[] }] : []));
      return { errorCount: data?.error_count ?? fields.length, fields };
    },
    list: async () => (await request<string[]>({ method: 'GET', path: '/connectors' })) ?? [],
    /** The stored config as submitted (config-provider references unresolved), or undefined if there is no such connector. */
    getConfig: (name: string) => request<Record<string, string>>({ method: 'GET', path: `/connectors/${enc(name)}/config` }, { allow404: true }),
    putConfig: (name: string, config: Readonly<Record<string, string>>) =>
      request<unknown>({ method: 'PUT', path: `/connectors/${enc(name)}/config`, body: config }),
    /** `POST /connectors`; an existing name is a 409 that no retry fixes. */
    create: (name: string, config: Readonly<Record<string, string>>, initialState?: 'RUNNING' | 'PAUSED' | 'STOPPED') =>
      request<unknown>(
        { method: 'POST', path: '/connectors', body: { name, config, ...(initialState ? { initial_state: initialState } : {}) } },
        { retryConflicts: false },
      ),
    status: (name: string) => request<ConnectorStatusInfo>({ method: 'GET', path: `/connectors/${enc(name)}/status` }, { allow404: true }),
    tasks: async (name: string) =>
      (await request<Array<{ id: { task: number }; config: Record<string, string> }>>({ method: 'GET', path: `/connectors/${enc(name)}/tasks` }, { allow404: true })) ??
      [],
    restart: (name: string, { includeTasks = true, onlyFailed = true } = {}) =>
      request<unknown>({
        method: 'POST',
        path: `/connectors/${enc(name)}/restart`,
        query: { includeTasks: String(includeTasks), onlyFailed: String(onlyFailed) },
      }),
    pause: (name: string) => request<unknown>({ method: 'PUT', path: `/connectors/${enc(name)}/pause` }),
    resume: (name: string) => request<unknown>({ method: 'PUT', path: `/connectors/${enc(name)}/resume` }),
    stop: (name: string) => request<unknown>({ method: 'PUT', path: `/connectors/${enc(name)}/stop` }),
    /** True if it was deleted, false if there was no such connector. */
    delete: async (name: string): Promise<boolean> => {
      try {
        await request<unknown>({ method: 'DELETE', path: `/connectors/${enc(name)}` });
        return true;
      } catch (error) {
        if (connectStatus(error) === 404) return false;
        throw error;
      }
    },
    /** Connect's stored source offsets; empty when there are none or no such connector. */
    offsets: async (name: string) =>
      (await request<{ offsets: ConnectorOffset[] }>({ method: 'GET', path: `/connectors/${enc(name)}/offsets` }, { allow404: true }))?.offsets ?? [],
    /** `DELETE /connectors/{name}/offsets`: the connector must be STOPPED. */
    resetOffsets: (name: string) => request<unknown>({ method: 'DELETE', path: `/connectors/${enc(name)}/offsets` }),
  };
}
