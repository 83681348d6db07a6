import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { Agent as HttpsAgent } from 'node:https';
import axios, { type AxiosInstance } from 'axios';
import type { Type } from 'avsc';
import { readPemFile } from '../config';
import { scrubHttpError } from '../log/redact';
import { isOutboxError, OutboxError } from '../errors';
import { retry } from '../retry';
import { avroTypeOptions, parseAvroType } from './logical-types';
import { errorCode, fromClientError, fromRegistryStatus, registryUnavailable, splitCredentials, writerSchemaFailure } from './registry-errors';
import { createWriterTypeCache } from './writer-type-cache';

/** `config.registry`: the Confluent-compatible base URL and optional basic-auth credentials. */
export interface RegistrySettings {
  url: string;
  username?: string;
  password?: string;
  /** PEM CA bundle for an https registry signed by a private CA. */
  caFile?: string;
  /** false accepts any certificate: throw-away test setups only. */
  rejectUnauthorized?: boolean;
}

/**
 * Basic auth (settings first, else user:password from the URL, which is then stripped) and, for
 * https with a CA file or rejectUnauthorized=false, the agent both HTTP clients use. Exported so tests
 * can check what reaches the clients without a network.
 */
export function registryTransport(settings: RegistrySettings): { url: string; auth?: { username: string; password: string }; agent?: HttpsAgent } {
  const fromUrl = splitCredentials(settings.url);
  const username = settings.username ?? fromUrl.username;
  const password = settings.password ?? fromUrl.password;
  const auth = username !== undefined ? { username, password: password ?? '' } : undefined;
  const agent =
    fromUrl.url.startsWith('https:') && (settings.caFile !== undefined || settings.rejectUnauthorized === false)
      ? new HttpsAgent({
          ...(settings.caFile ? { ca: readPemFile(settings.caFile, 'registry.caFile (OUTBOX_REGISTRY_CA_FILE)') } : {}),
          rejectUnauthorized: settings.rejectUnauthorized ?? true,
          keepAlive: true,
        })
      : undefined;
  return { url: fromUrl.url, auth, agent };
}

export interface RegistryConnectionOptions {
  /** Extra attempts for a call that failed retriably (outage, 5xx). Default 2. */
  retries?: number;
  /** Per-request timeout. Default 10 s. */
  timeoutMs?: number;
  /** How long an unknown schema id is remembered as unknown before the registry is asked again. Default 5 s. */
  notFoundCacheMs?: number;
}

export interface RegisteredVersion {
  id: number;
  version: number;
}

export interface RegistryConnection {
  /** The base URL without credentials: safe for messages and logs. */
  readonly url: string;
  /** The id of exactly this schema under the subject; undefined when the subject or schema is not there. */
  lookup(subject: string, schemaText: string): Promise<RegisteredVersion | undefined>;
  latest(subject: string): Promise<(RegisteredVersion & { schema: string }) | undefined>;
  /** Every version of the subject, oldest first; empty for a subject that does not exist. */
  versions(subject: string): Promise<Array<RegisteredVersion & { schema: string }>>;
  /** The subject's compatibility level; undefined for a subject that does not exist yet. */
  compatibilityLevel(subject: string): Promise<string | undefined>;
  /** `POST /compatibility/subjects/{s}/versions/latest`: the registry's own verdict, without reasons. */
  isCompatible(subject: string, schemaText: string): Promise<boolean>;
  /** Registers (idempotent: an identical schema returns its existing id). 409 → SCHEMA_INCOMPATIBLE. */
  register(subject: string, schemaText: string): Promise<number>;
  /**
   * The writer schema of a record, parsed with the codec's logical types; undefined for an id the
   * registry does not know (remembered for `notFoundCacheMs` only). Every registry failure here is
   * retriable: none of them is the record's fault. `fresh`: ask the registry now, past the cache.
   */
  writerType(id: number, options?: { fresh?: boolean }): Promise<Type | undefined>;
}

const CONTENT_TYPE = 'application/vnd.schemaregistry.v1+json';

/**
 * Registration goes through @kafkajs/confluent-schema-registry, which also sets a new subject's
 * compatibility level (stack.md §4.2). Reads go through axios with the same credentials, because the
 * client hides what they depend on: its lookup turns every 404 into a status-less error (subject
 * missing, schema missing and wrong base path look alike) and it reports a refused connection as
 * "status 400". Branching on the registry's `error_code` keeps "not registered" apart from "misconfigured".
 */
export function createRegistryConnection(settings: RegistrySettings, options: RegistryConnectionOptions = {}): RegistryConnection {
  const { url, auth, agent } = registryTransport(settings);
  const timeoutMs = options.timeoutMs ?? 10_000;
  const retries = options.retries ?? 2;

  const http: AxiosInstance = axios.create({
    baseURL: url,
    auth,
    ...(agent ? { httpsAgent: agent } : {}),
    timeout: timeoutMs,
    headers: { 'Content-Type': CONTENT_TYPE, Accept: `${CONTENT_TYPE}, application/json` },
    validateStatus: () => true,
  });
  const client = new SchemaRegistry(
    {
      host: url,
      auth,
      ...(agent ? { agent } : {}),
      // No `retry` option: the client Object.assign()s it into its module-wide defaults, which would
      // change every other client in the process. Its GET retries only cover GET /config here anyway.
      middlewares: [() => ({ prepareRequest: (next) => next().then((req) => req.enhance({ timeout: timeoutMs })) })],
    },
    { [SchemaType.AVRO]: avroTypeOptions() },
  );

  async function call(method: 'get' | 'post', path: string, what: string, body?: unknown): Promise<{ status: number; data: unknown }> {
    const request = `${method.toUpperCase()} ${path}`;
    return withRetries(retries, async () => {
      let response;
      try {
        response = await http.request({ method, url: path, data: body === undefined ? undefined : JSON.stringify(body) });
      } catch (error) {
        const code = (error as { code?: string }).code;
        throw registryUnavailable(url, what, `${code ?? 'network error'}: ${(error as Error).message}`, scrubHttpError(error), auth?.username);
      }
      if (response.status >= 500 || response.status === 429 || response.status === 401 || response.status === 403) {
        throw fromRegistryStatus(url, what, request, response.status, response.data, undefined, auth?.username);
      }
      return { status: response.status, data: response.data as unknown };
    });
  }

  const unexpected = (what: string, path: string, method: string, r: { status: number; data: unknown }) =>
    fromRegistryStatus(url, what, `${method} ${path}`, r.status, r.data, undefined, auth?.username);
  const subjectPath = (subject: string) => `/subjects/${encodeURIComponent(subject)}`;
  const cachedWriterType = createWriterTypeCache(fetchWriterType, { notFoundCacheMs: options.notFoundCacheMs });
  const writerType = (id: number, o?: { fresh?: boolean }) => (o?.fresh ? fetchWriterType(id) : cachedWriterType(id));

  return {
    url,

    async lookup(subject, schemaText) {
      const what = `looking up the schema id under subject ${subject}`;
      const r = await call('post', subjectPath(subject), what, { schema: schemaText });
      if (r.status === 200) return asVersion(r.data);
      // 40401: no such subject; 40403: the subject exists but not with this schema.
      if (r.status === 404 && (errorCode(r.data) === 40401 || errorCode(r.data) === 40403)) return undefined;
      throw unexpected(what, subjectPath(subject), 'POST', r);
    },

    async latest(subject) {
      const what = `reading the latest version of subject ${subject}`;
      const path = `${subjectPath(subject)}/versions/latest`;
      const r = await call('get', path, what);
      if (r.status === 200) return { ...asVersion(r.data), schema: String((r.data as { schema?: unknown }).schema) };
      if (r.status === 404 && errorCode(r.data) === 40401) return undefined;
      throw unexpected(what, path, 'GET', r);
    },

    async versions(subject) {
      const what = `listing the versions of subject ${subject}`;
      const path = `${subjectPath(subject)}/versions`;
      const r = await call('get', path, what);
      if (r.status === 404 && errorCode(r.data) === 40401) return [];
      if (r.status !== 200 || !Array.isArray(r.data)) throw unexpected(what, path, 'GET', r);
      const all = [];
      for (const version of (r.data as unknown[]).map(Number).sort((a, b) => a - b)) {
        const one = await call('get', `${path}/${version}`, what);
        if (one.status !== 200) throw unexpected(what, `${path}/${version}`, 'GET', one);
        all.push({ ...asVersion(one.data), schema: String((one.data as { schema?: unknown }).schema) });
      }
      return all;
    },

    compatibilityLevel,

    async isCompatible(subject, schemaText) {
      const what = `checking compatibility with subject ${subject}`;
      const path = `/compatibility${subjectPath(subject)}/versions/latest`;
      const r = await call('post', path, what, { schema: schemaText });
      const verdict = (r.data as { is_compatible?: unknown } | undefined)?.is_compatible;
      if (r.status === 200 && typeof verdict === 'boolean') return verdict;
      throw unexpected(what, path, 'POST', r);
    },

    async register(subject, schemaText) {
      const what = `registering a schema under subject ${subject}`;
      const level = (await compatibilityLevel(subject)) ?? 'BACKWARD';
      return withRetries(retries, async () => {
        try {
          // Passing the subject's own level keeps the client from refusing a subject set to e.g. FULL.
          const { id } = await client.register({ type: SchemaType.AVRO, schema: schemaText }, { subject, compatibility: level as never });
          return id;
        } catch (error) {
          if ((error as { status?: unknown }).status === 409) {
            throw new OutboxError(
              'SCHEMA_INCOMPATIBLE',
              `The registry refused the schema for subject ${subject} as incompatible (${level}) with the registered one: ` +
                `${(error as Error).message.replace(/^.* - /, '')}. Run \`outbox schemas:check\` for the fields to fix.`,
              { cause: error, details: { subject, level } },
            );
          }
          throw fromClientError(url, what, `POST ${subjectPath(subject)}/versions`, error, auth?.username);
        }
      });
    },

    writerType,
  };

  async function compatibilityLevel(subject: string): Promise<string | undefined> {
    const what = `reading the compatibility level of subject ${subject}`;
    const path = `/config/${encodeURIComponent(subject)}`;
    const r = await call('get', path, what);
    if (r.status === 200) return String((r.data as { compatibilityLevel?: unknown }).compatibilityLevel ?? 'BACKWARD').toUpperCase();
    if (r.status === 404 && errorCode(r.data) === 40401) return undefined;
    throw unexpected(what, path, 'GET', r);
  }

  async function fetchWriterType(id: number): Promise<Type | undefined> {
    const what = `fetching schema id ${id}`;
    const path = `/schemas/ids/${id}`;
    const r = await call('get', path, what);
    if (r.status === 404 && errorCode(r.data) === 40403) return undefined;
    if (r.status !== 200) throw writerSchemaFailure(url, id, r.status, r.data, auth?.username);
    const body = r.data as { schema?: unknown; schemaType?: unknown };
    if (body.schemaType !== undefined && body.schemaType !== 'AVRO') {
      throw new OutboxError('DECODE_FAILED', `Schema id ${id} in ${url} is a ${String(body.schemaType)} schema, not Avro.`, { details: { schemaId: id } });
    }
    try {
      return parseAvroType(JSON.parse(String(body.schema)));
    } catch (error) {
      throw new OutboxError('DECODE_FAILED', `Schema id ${id} in ${url} is not a usable Avro schema: ${(error as Error).message}.`, { cause: error, details: { schemaId: id } });
    }
  }
}

function asVersion(data: unknown): RegisteredVersion {
  const { id, version } = data as { id?: unknown; version?: unknown };
  return { id: Number(id), version: Number(version) };
}

/**
 * Retries an outage (unreachable, 5xx, 429) with short backoff and jitter. Other failures, retriable
 * ones included (refused credentials), go back to the caller at once: seconds will not fix them.
 */
function withRetries<T>(retries: number, body: () => Promise<T>): Promise<T> {
  return retry(() => body(), {
    attempts: retries + 1,
    initialDelayMs: 100,
    maxDelayMs: 2_000,
    ceilingMs: 30_000,
    shouldRetry: (error) => isOutboxError(error, 'REGISTRY_UNAVAILABLE'),
  });
}
