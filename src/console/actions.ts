import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { DEFAULT_RELEASE_SETTLE_MS, parkedTable, runDlqRelease, runDlqReplay, target } from '../cli/dlq-operations';
import type { OutboxConfig } from '../config';
import { pauseConnector, restartConnector, resumeConnector } from '../connector';
import { isOutboxError, OutboxError, toOutboxError } from '../errors';
import type { Logger } from '../log';
import { consumerName, DEFAULT_REPLAY_FOLLOW_MS, DEFAULT_REPLAY_TIMEOUT_MS } from '../router';
import type { AuditLog } from './audit';
import type { Operator } from './auth';

/**
 * The console's actions. Each is the body of a CLI command (dlq-operations.ts, src/connector), given
 * what the page chose, with the CLI's defaults; each is written to the audit log before it runs and
 * again with its result. One action runs at a time (CONSOLE_BUSY for a second).
 */

export type ActionName = 'replay' | 'release' | 'connector-restart' | 'connector-pause' | 'connector-resume';

/** What the page sends. Strings only where the CLI takes strings; checked here, not trusted. */
export interface ActionRequest {
  action: ActionName;
  aggregateType?: string;
  consumer?: string;
  key?: string;
  id?: string;
  /** replay: only say what would be replayed (the confirmation's preview). */
  dryRun?: boolean;
  /** release: preview the parked rows that would be released. */
  preview?: boolean;
}

export interface ActionContext {
  operator: Operator;
  address: string | null;
}

export interface Actions {
  run(request: unknown, context: ActionContext): Promise<Record<string, unknown>>;
  busy(): boolean;
}

const CONNECTOR_ACTIONS = {
  'connector-restart': { run: restartConnector, done: 'restart requested for failed instances' },
  'connector-pause': { run: pauseConnector, done: 'pause requested' },
  'connector-resume': { run: resumeConnector, done: 'resume requested' },
} as const;

const ACTIONS: readonly ActionName[] = ['replay', 'release', ...(Object.keys(CONNECTOR_ACTIONS) as ActionName[])];

function invalid(message: string): OutboxError {
  return new OutboxError('CONSOLE_REQUEST_INVALID', message);
}

/** The request's fields, each a non-empty string of bounded length or absent; anything else is refused. */
export function parseActionRequest(body: unknown): ActionRequest {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw invalid('An action is a JSON object such as {"action":"replay","aggregateType":"order","id":"…"}.');
  const b = body as Record<string, unknown>;
  if (typeof b.action !== 'string' || !ACTIONS.includes(b.action as ActionName)) throw invalid(`"action" must be one of ${ACTIONS.join(', ')}; got ${JSON.stringify(b.action)}.`);
  const text = (name: string): string | undefined => {
    const v = b[name];
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string' || v.length > 1_000) throw invalid(`"${name}" must be a string of at most 1,000 characters.`);
    return v;
  };
  const flag = (name: string): boolean => {
    const v = b[name];
    if (v === undefined) return false;
    if (typeof v !== 'boolean') throw invalid(`"${name}" must be true or false.`);
    return v;
  };
  return { action: b.action as ActionName, aggregateType: text('aggregateType'), consumer: text('consumer'), key: text('key'), id: text('id'), dryRun: flag('dryRun'), preview: flag('preview') };
}

export function createActions(options: { config: OutboxConfig; audit: AuditLog; pool: Pool; logger?: Logger }): Actions {
  const { config, audit } = options;
  let running = false;

  /** The parked rows a release would delete: the confirmation's preview (the release itself is releaseKeys). */
  async function releasePreview(request: ActionRequest): Promise<Record<string, unknown>> {
    const consumer = consumerName(config, request.consumer ?? config.router.consumer);
    const { rows } = await options.pool.query<{ aggregate_id: string; event_id: string; error_code: string }>(
      `SELECT aggregate_id, event_id, error_code FROM ${parkedTable(config)} WHERE consumer = $1 AND aggregate_type = $2 AND ($3::text IS NULL OR aggregate_id = $3) AND ($4::text IS NULL OR event_id IN ($4, lower($4))) ORDER BY aggregate_id, seq LIMIT 1000`,
      [consumer, request.aggregateType, request.key ?? null, request.id ?? null],
    );
    return { consumer, wouldRelease: rows.map((r) => ({ aggregateId: r.aggregate_id, eventId: r.event_id, errorCode: r.error_code })) };
  }

  async function perform(request: ActionRequest): Promise<Record<string, unknown>> {
    switch (request.action) {
      case 'replay': {
        if (!request.aggregateType) throw invalid('A replay needs "aggregateType".');
        const outcome = await runDlqReplay(
          config,
          {
            aggregateType: request.aggregateType,
            consumer: request.consumer,
            key: request.key,
            ids: request.id ? [request.id] : undefined,
            // Outstanding mode, as `dlq:replay` without --all: only what is still parked for the consumer.
            all: false,
            beyondHorizon: false,
            unattributed: false,
            dryRun: request.dryRun ?? false,
            timeoutMs: DEFAULT_REPLAY_TIMEOUT_MS,
            followMs: DEFAULT_REPLAY_FOLLOW_MS,
          },
          { logger: options.logger },
        );
        const { report } = outcome;
        return {
          dlqTopic: outcome.dlqTopic,
          consumer: outcome.consumer,
          dryRun: report.dryRun,
          scanned: report.scanned,
          replayed: report.replayed,
          letters: report.sample,
          stillParked: report.stillParkedDetail,
          leftAlone: { otherConsumer: report.otherConsumer, unattributed: report.unattributed, reduced: report.reduced, beyondHorizon: report.beyondHorizon, withoutOrigin: report.withoutOrigin },
        };
      }
      case 'release': {
        if (!request.aggregateType) throw invalid('A release needs "aggregateType".');
        if (!request.key && !request.id) throw invalid('The console releases one key ("key") or one event ("key" and "id"); every key of a type at once is `outbox dlq:release` without --key.');
        if (request.preview) return releasePreview(request);
        const outcome = await runDlqRelease(config, { aggregateType: request.aggregateType, consumer: request.consumer, key: request.key, id: request.id, head: false, settleMs: DEFAULT_RELEASE_SETTLE_MS });
        return { consumer: outcome.consumer, released: outcome.released, parkedAgain: outcome.parkedAgain ?? null };
      }
      default: {
        const connector = CONNECTOR_ACTIONS[request.action];
        await connector.run(config);
        return { connector: config.connector.name, result: connector.done };
      }
    }
  }

  return {
    busy: () => running,
    async run(body, context) {
      const request = parseActionRequest(body);
      if (request.aggregateType) target({ aggregateType: request.aggregateType }, config);
      // Previews change nothing: not audited, and they may run beside an action.
      const readOnly = (request.action === 'replay' && request.dryRun) || (request.action === 'release' && request.preview);
      if (readOnly) return perform(request);
      if (running) throw new OutboxError('CONSOLE_BUSY', 'Another action is running; wait for its result, then try again.', { retriable: true });
      running = true;
      const id = randomUUID();
      const who = { operator: context.operator.name, via: context.operator.via, address: context.address };
      const what = { action: request.action, request: { ...request } };
      try {
        audit.write({ at: new Date().toISOString(), id, who, what, phase: 'started' });
        try {
          const result = await perform(request);
          audit.write({ at: new Date().toISOString(), id, who, what, phase: 'ok', result });
          options.logger?.info({ event: 'console.action', id, operator: who.operator, action: request.action, ok: true }, `console: ${request.action} by ${who.operator}`);
          return result;
        } catch (error) {
          const e = toOutboxError(error);
          audit.write({ at: new Date().toISOString(), id, who, what, phase: 'failed', error: { code: e.code, message: e.message } });
          options.logger?.warn({ event: 'console.action', id, operator: who.operator, action: request.action, ok: false, code: e.code }, `console: ${request.action} by ${who.operator} failed`);
          throw isOutboxError(error) ? error : e;
        }
      } finally {
        running = false;
      }
    },
  };
}
