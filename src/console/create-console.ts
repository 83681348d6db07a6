import { isIP } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Pool } from 'pg';
import { Registry } from 'prom-client';
import { parkedTable } from '../cli/dlq-operations';
import { createCodec, type Codec } from '../codec';
import type { OutboxConfig } from '../config';
import { createPool, qualified } from '../db';
import { OutboxError } from '../errors';
import { createKafka } from '../kafka';
import type { Logger } from '../log';
import { collectProcessMetrics, createLifecycle, repeatUntilAborted, type ServiceStatus } from '../service';
import { readParked } from '../status/parked';
import { topicNames } from '../topics';
import { createActions, type Actions } from './actions';
import { loadPage } from './assets';
import { openAuditLog, type AuditLog } from './audit';
import { createConsoleAuth } from './auth';
import { decodePayload, filterLetters, letterStates, letterView, type LetterFilter, type LetterView, type PayloadView } from './dead-letters';
import { createDlqCache, type CachedLetter, type DlqCache } from './dlq-cache';
import { maskRules } from './mask';
import { createSampler, PARKED_KEYS_SHOWN, type Sampler } from './sampler';
import { createConsoleHandler, type ConsoleData } from './server';

export interface ConsoleOptions {
  config: OutboxConfig;
  logger?: Logger;
}

export interface Console {
  start(): Promise<void>;
  stop(): Promise<void>;
  status(): ServiceStatus;
  /** Started and sampled once. */
  ready(): boolean;
  readonly readOnly: boolean;
  readonly registry: Registry;
  /** Serves the page and the API (the service runtime's listener hands it every non-probe request). */
  handle(req: IncomingMessage, res: ServerResponse): void;
}

/** Letters shown per page of the dead-letter view at most (each is decoded for it). */
const LETTERS_SHOWN = 100;

const isLoopback = (host: string) => host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
const isWildcard = (host: string) => host === '0.0.0.0' || host === '::';

/**
 * Refuses what would expose the console: an address other than loopback without credentials (anyone
 * who reaches it would read payloads). Without credentials the console is read-only.
 */
function checkExposure(config: OutboxConfig, credentials: boolean): void {
  const { host } = config.console;
  if (!credentials && !isLoopback(host)) {
    throw new OutboxError(
      'CONSOLE_AUTH_REQUIRED',
      `outbox console on ${host} (not loopback) needs operator credentials: set OUTBOX_CONSOLE_TOKEN (16+ characters, e.g. \`openssl rand -hex 32\`) or OUTBOX_CONSOLE_USERNAME and OUTBOX_CONSOLE_PASSWORD, or bind it to 127.0.0.1 (--host).`,
      { details: { host } },
    );
  }
}

/**
 * `outbox console`: the operator's page and JSON API over the pipeline, as one service of the
 * runtime (lifecycle; /livez, /readyz, /healthz and /metrics on the same listener). It samples the
 * pipeline (sampler.ts), reads the dead-letter topics (dlq-cache.ts), and acts only through the CLI's
 * code (actions.ts), each action audited. docs/console.md.
 */
export function createConsole(options: ConsoleOptions): Console {
  const { config, logger: log } = options;
  const settings = config.console;
  const auth = createConsoleAuth(settings);
  checkExposure(config, auth.configured);
  const readOnly = settings.readOnly || !auth.configured;
  const page = loadPage();
  const rules = maskRules(settings.sensitiveFields);
  const names = topicNames(config.connector.topicReplacement);
  const registry = new Registry();
  collectProcessMetrics(registry);

  let pool: Pool | undefined;
  let audit: AuditLog | undefined;
  let actions: Actions | undefined;
  let sampler: Sampler | undefined;
  let dlq: DlqCache | undefined;
  let codec: Codec | undefined;
  let loop: Promise<void> | undefined;
  let sampled = false;
  const decoded = new Map<string, PayloadView>();

  const tables = () => ({ inbox: qualified(config.outbox.schema, config.outbox.inboxTable), parked: parkedTable(config) });

  /** The newest cached letter of an event (for a parked key's reason). */
  const letterOf = (topic: string, eventId: string): CachedLetter | undefined => {
    const letters = dlq?.letters(topic) ?? [];
    for (let i = letters.length - 1; i >= 0; i--) if ((letters[i] as CachedLetter).headers.id?.toString().toLowerCase() === eventId.toLowerCase()) return letters[i];
    return undefined;
  };

  async function payloadOf(letter: CachedLetter): Promise<PayloadView> {
    const ref = `${letter.topic}/${letter.partition}/${letter.offset}`;
    let view = decoded.get(ref);
    if (!view) {
      view = await decodePayload(letter, codec as Codec, rules);
      decoded.set(ref, view);
      // Bounded: the oldest decodings go first.
      if (decoded.size > 5_000) decoded.delete(decoded.keys().next().value as string);
    }
    return view;
  }

  const data: ConsoleData = {
    overview: () => {
      const latest = sampler?.latest();
      return { readOnly, sampleIntervalMs: settings.sampleIntervalMs, dlqReader: { error: dlq?.error() ?? null, topics: dlq?.topics() ?? [] }, snapshot: latest ?? null };
    },
    series: () => ({ sampleIntervalMs: settings.sampleIntervalMs, historyMs: settings.historyMs, series: sampler?.series() ?? {} }),
    async deadLetters(query) {
      const topics = (dlq?.topics() ?? []).map((t) => ({ ...t, aggregateType: safeAggregateType(t.topic) }));
      const aggregateType = query.get('aggregateType') ?? undefined;
      const topic = aggregateType ? names.dlqFor(names.routed(aggregateType)) : (query.get('topic') ?? topics[0]?.topic);
      if (!topic) return { topics, topic: null, total: 0, letters: [], facets: { consumers: [], eventTypes: [], errorCodes: [] }, readerError: dlq?.error() ?? null };
      const all = dlq?.letters(topic) ?? [];
      const filter = letterFilter(query);
      const states = await letterStates(pool as Pool, tables(), all);
      const kept = filterLetters(all, states, filter);
      const letters: LetterView[] = [];
      for (const letter of kept.slice(0, LETTERS_SHOWN)) letters.push(letterView(letter, states.get(letter) ?? 'not-parked', await payloadOf(letter), rules));
      const facet = (name: string) => [...new Set(all.map((l) => l.headers[name]?.toString()).filter((v): v is string => Boolean(v)))].sort();
      return {
        topics,
        topic,
        aggregateType: safeAggregateType(topic),
        total: kept.length,
        letters,
        facets: { consumers: facet('x-consumer'), eventTypes: facet('eventType'), errorCodes: facet('x-error-code') },
        readerError: dlq?.error() ?? null,
      };
    },
    async parked() {
      const parked = await readParked(config, 5_000, PARKED_KEYS_SHOWN);
      const keys = parked.keys.map((k) => {
        const letter = letterOf(names.dlqFor(names.routed(k.aggregateType)), k.headEventId);
        const reason = letter?.headers['x-error-message']?.toString() ?? null;
        return { ...k, ageMs: Date.now() - Date.parse(k.since), reason };
      });
      return { ...parked, keys };
    },
    audit: () => ({ path: audit?.path ?? null, entries: audit?.recent(50) ?? [] }),
  };

  function safeAggregateType(topic: string): string | null {
    try {
      return names.aggregateTypeOfDlq(topic);
    } catch {
      return null;
    }
  }

  const boundHost = settings.host.toLowerCase();
  const extraHosts = new Set(settings.allowedHosts.map((h) => h.toLowerCase()));
  const handler = createConsoleHandler({
    page,
    auth,
    get actions() {
      return actions;
    },
    data,
    readOnly,
    logger: log,
    hostAllowed: (host, localPort) => {
      if (isWildcard(boundHost) || extraHosts.has(host)) return true;
      const names = new Set([boundHost.includes(':') ? `[${boundHost}]` : boundHost, 'localhost', '127.0.0.1', '[::1]']);
      return [...names].some((name) => host === `${name}:${localPort}` || (localPort === 80 && host === name));
    },
  });

  const lifecycle = createLifecycle('console', {
    start: async (signal) => {
      pool = createPool(config.database, { max: 3, application_name: 'outbox-console' }, (error) => log?.warn({ event: 'console.pool-error', err: error }, 'console: idle database connection failed'));
      if (!readOnly) {
        audit = openAuditLog(settings.auditLog);
        actions = createActions({ config, audit, pool, logger: log });
      }
      codec = createCodec({ registry: config.registry });
      dlq = createDlqCache({ kafka: createKafka(config, { role: 'console', logger: log }), pattern: names.dlqPattern, limit: settings.dlqLimit, logger: log });
      sampler = createSampler({ config, pool, logger: log });
      const s = sampler;
      const d = dlq;
      await Promise.all([d.start(), s.sample()]);
      sampled = true;
      loop = repeatUntilAborted(
        async () => {
          await s.sample();
          await d.refresh();
        },
        { signal, intervalMs: settings.sampleIntervalMs, fromStart: true, onError: (error) => log?.warn({ event: 'console.sample-failed', err: error }, 'console: sample failed') },
      ).then(() => undefined);
      // The first wait of the loop is a whole interval: the sample above was this run's first.
    },
    stop: async () => {
      await loop?.catch(() => {});
      await dlq?.stop();
      await pool?.end().catch(() => {});
      audit?.close();
      audit = undefined;
      actions = undefined;
    },
  });

  return {
    start: () => lifecycle.start(),
    stop: () => lifecycle.stop(),
    status: () => lifecycle.status(),
    ready: () => lifecycle.state === 'running' && sampled,
    readOnly,
    registry,
    handle: handler,
  };
}

function letterFilter(query: URLSearchParams): LetterFilter {
  const time = (name: string): number | undefined => {
    const v = query.get(name);
    if (!v) return undefined;
    const t = /^\d+$/.test(v) ? Number(v) : Date.parse(v);
    if (Number.isNaN(t)) throw new OutboxError('CONSOLE_REQUEST_INVALID', `"${name}" must be a time (ISO 8601 or epoch ms), got ${JSON.stringify(v.slice(0, 100))}.`);
    return t;
  };
  const state = query.get('state') ?? 'outstanding';
  if (state !== 'outstanding' && state !== 'all') throw new OutboxError('CONSOLE_REQUEST_INVALID', `"state" is outstanding or all, got ${JSON.stringify(state.slice(0, 100))}.`);
  return {
    consumer: query.get('consumer') || undefined,
    key: query.get('key') ?? undefined,
    eventType: query.get('eventType') || undefined,
    errorCode: query.get('errorCode') || undefined,
    since: time('since'),
    until: time('until'),
    state,
  };
}
