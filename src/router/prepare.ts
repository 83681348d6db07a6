import type { KafkaMessage } from 'kafkajs';
import type { ZodType } from 'zod';
import { isOutboxError, OutboxError } from '../errors';
import { parse } from '../config/parse';
import { inboxIdType, uuidInboxRefuses } from '../db';
import { decodeValue, DEFAULT_ENVELOPE, DLQ_HEADER, headerText, isUuid, parseEnvelopeHeaders, SCHEMA_VERSION_HEADER, type EnvelopeHeaders } from '../envelope';
import { messageOf, REPLAY_HEADER, type PayloadSchema, waitForInfrastructure, whereOf, type BatchScope, type Failure, type Prepared, type RouterDeps, type Where } from './record-context';
import type { RoutedEvent } from './types';

/**
 * The first part of a record's way: headers, handler lookup, decode (waiting out a registry outage),
 * payload schema. Nothing is written; what to do with the record is decided by its result.
 */
export async function prepareRecord(topic: string, partition: number, message: KafkaMessage, deps: RouterDeps, scope: BatchScope): Promise<Prepared> {
  deps.stats.received++;
  const aggregateType = deps.aggregateTypeOf(topic);
  const where: Where = { topic, partition, message, aggregateType, key: message.key ? message.key.toString('utf8') : '' };
  const deadLetter = (failure: Failure, eventId?: string): Prepared => ({ ...where, kind: 'dead-letter', failure, eventId });
  const replayFor = replayedForOther(message, deps);
  if (replayFor) return replayFor(where);

  const envelope = deps.envelope ?? DEFAULT_ENVELOPE;
  let headers: EnvelopeHeaders;
  try {
    headers = parseEnvelopeHeaders(message.headers, envelope);
    if (message.value === null || message.value === undefined) {
      throw new OutboxError('RECORD_INVALID', 'The record has no value (a tombstone?); routed outbox records always carry the payload.', {});
    }
  } catch (error) {
    return deadLetter(failureOf(error));
  }
  // A bigint or text id (a Debezium outbox's) needs the inbox of migration 013: asked once, only for such ids.
  if (!isUuid(headers.id) && (await inboxIdType(deps.pool, deps.inboxTable)) === 'uuid') return deadLetter(failureOf(uuidInboxRefuses(headers.id, deps.inboxTable)), headers.id);
  // The event type in a value field (Debezium's envelope placement): known only once the value is decoded.
  let decoded: Decoded | undefined;
  if (headers.eventType === undefined) {
    decoded = await decodeWaiting(where, headers, deps, scope);
    if (decoded.kind !== 'decoded') return decoded.kind === 'aborted' ? decoded : deadLetter(decoded.failure, headers.id);
  }
  const eventType = (headers.eventType ?? (decoded as { eventType?: string }).eventType) as string;
  const handler = deps.handlers[aggregateType]?.[eventType];
  if (!handler) {
    const known = Object.keys(deps.handlers[aggregateType] ?? {});
    const reason = `No handler for aggregate type ${JSON.stringify(aggregateType)}, event type ${JSON.stringify(eventType)}; handled here: ${known.length ? known.join(', ') : '(none for this aggregate type)'}.`;
    const policy = deps.unknownEventTypes?.[aggregateType] ?? deps.unknownEventType ?? 'dead-letter';
    if (policy === 'skip') return { ...where, kind: 'skip', reason };
    if (policy === 'block') return { ...where, kind: 'block', reason, eventId: headers.id };
    return deadLetter({ code: 'HANDLER_NOT_FOUND', message: reason, attempts: 1 }, headers.id);
  }

  decoded ??= await decodeWaiting(where, { ...headers, eventType }, deps, scope);
  if (decoded.kind !== 'decoded') return decoded.kind === 'aborted' ? decoded : deadLetter(decoded.failure, headers.id);
  let payload = decoded.payload;

  const declared = deps.payloadSchemas?.[aggregateType]?.[eventType];
  if (declared) {
    try {
      const { schema, label } = payloadSchemaFor(declared, headers.extra, `${aggregateType}.${eventType}`);
      // Values hidden: the message goes into the dead letter's headers, and payloads are business data.
      payload = parse(schema, payload, { heading: `The ${label} payload fails its schema`, code: 'PAYLOAD_INVALID', root: '(payload)', hideValues: true, maxProblems: 10 });
    } catch (error) {
      return deadLetter({ code: 'PAYLOAD_INVALID', message: (error as Error).message, attempts: 1 }, headers.id);
    }
  }

  const event: RoutedEvent = {
    id: headers.id,
    aggregateType,
    aggregateId: where.key,
    type: eventType,
    payload,
    headers: headers.extra,
    traceparent: headers.traceparent,
    createdAt: message.timestamp ? new Date(Number(message.timestamp)) : undefined,
  };
  return { ...where, kind: 'ready', event, handler, replayed: headerText(message.headers, REPLAY_HEADER) !== undefined };
}

/**
 * Decodes the value, waiting out a registry that cannot answer (the record is not at fault, and a
 * registry that resolves nothing would otherwise dead-letter every Avro record). One exception: a schema
 * id the registry does not know, while a live lookup of an id it resolved before still works, is one
 * stray record (written against another registry, or a corrupt header), not an outage; after
 * unknownSchemaIdWaitMs it is dead-lettered so the partition moves on.
 */
type Decoded = { kind: 'decoded'; payload: unknown; eventType?: string } | { kind: 'failed'; failure: Failure } | { kind: 'aborted' };

async function decodeWaiting(where: Where, headers: EnvelopeHeaders, deps: RouterDeps, scope: BatchScope): Promise<Decoded> {
  const started = Date.now();
  let code: string | undefined;
  const ended = (outcome: 'decoded' | 'dead-lettered' | 'aborted') => {
    if (code !== undefined) deps.emit('router.wait-ended', { ...whereOf(where), code, outcome, waitedMs: Date.now() - started });
  };
  try {
    return await decodeLoop(where, headers, deps, scope, started, ended, (c) => (code = c));
  } catch (error) {
    // A rebalance (the heartbeat inside the wait) or a failing registry check ends the wait too: its
    // entry on /readyz and the gauges must go with it, or it would stay there for good.
    ended('aborted');
    throw error;
  }
}

async function decodeLoop(
  where: Where,
  headers: EnvelopeHeaders,
  deps: RouterDeps,
  scope: BatchScope,
  started: number,
  ended: (outcome: 'decoded' | 'dead-lettered' | 'aborted') => void,
  setCode: (code: string) => void,
): Promise<Decoded> {
  let code: string | undefined;
  for (let wait = 1; ; wait++) {
    let error: unknown;
    try {
      // The consumer's reader schema when the codec has one (Avro schema resolution), else the writer's.
      // The consumer's reader schema only when the type is known first (from a header).
      const reader = headers.eventType === undefined ? undefined : { aggregateType: where.aggregateType, eventType: headers.eventType };
      const value = await decodeValue(where.message.value as Buffer, deps.envelope ?? DEFAULT_ENVELOPE, headers.contentType, deps.codec, reader);
      if (code === 'SCHEMA_ID_UNKNOWN') forgetUnknownId(where, deps);
      ended('decoded');
      return { kind: 'decoded', ...value };
    } catch (caught) {
      error = caught;
    }
    if (!(isOutboxError(error) && error.retriable)) {
      ended('dead-lettered');
      return { kind: 'failed', failure: failureOf(error) };
    }
    const waitedMs = Date.now() - started;
    const limit = isOutboxError(error, 'SCHEMA_ID_UNKNOWN') ? deps.unknownSchemaIdWaitMs || 0 : 0;
    // Counted per id: the next record naming an id already waited on does not wait all over again.
    const idWaitedMs = limit > 0 ? Date.now() - unknownSince(error, started, deps) : 0;
    if (limit > 0 && idWaitedMs >= limit) {
      const check = (await deps.codec.checkRegistry?.()) ?? { resolves: false, reason: 'the codec cannot check the registry' };
      if (check.resolves) {
        ended('dead-lettered');
        return { kind: 'failed', failure: { code: error.code, message: strayIdMessage(error, check.schemaId, idWaitedMs), attempts: wait } };
      }
      error = new OutboxError(error.code, `${error.message} Not given up on: ${check.reason}, so the registry itself may be at fault.`, { retriable: true, details: { ...error.details } });
    }
    // The records decoded before this one need not wait with it.
    if (code === undefined && scope.applyPending && !(await scope.applyPending())) {
      ended('aborted');
      return { kind: 'aborted' };
    }
    code = (error as OutboxError).code;
    setCode(code);
    const maxDelayMs = limit > idWaitedMs ? limit - idWaitedMs : undefined;
    if (!(await waitForInfrastructure(error, wait, whereOf(where), deps, scope, { waitedMs, maxDelayMs }))) {
      ended('aborted');
      return { kind: 'aborted' };
    }
  }
}

/** The schema id this record waited on resolves now: a later wait on it starts from zero. */
function forgetUnknownId(where: Where, deps: RouterDeps): void {
  const value = where.message.value;
  if (deps.unknownSchemaIds && value && value.length >= 5 && value[0] === 0) deps.unknownSchemaIds.delete(value.readInt32BE(1));
}

/** When the record's schema id was first found unknown by this router (remembered in deps.unknownSchemaIds). */
function unknownSince(error: OutboxError, started: number, deps: RouterDeps): number {
  const id = error.details?.schemaId;
  const seen = deps.unknownSchemaIds;
  if (typeof id !== 'number' || !seen) return started;
  // Bounded: ids come from record bytes; a flood of distinct ones only costs them the shared head start.
  if (!seen.has(id) && seen.size >= 10_000) seen.clear();
  if (!seen.has(id)) seen.set(id, started);
  return seen.get(id) as number;
}

function strayIdMessage(error: OutboxError, resolvedId: number, waitedMs: number): string {
  const { schemaId, registry } = error.details as { schemaId?: number; registry?: string };
  return (
    `Schema id ${String(schemaId)} is not in the registry at ${String(registry)}, which still resolves schema id ${resolvedId} (asked again just now); ` +
    `after waiting ${Math.round(waitedMs / 1000)} s (router.unknownSchemaIdWaitMs) this record is taken for one written against another registry ` +
    'or with a corrupt value, and set aside so its partition moves on. Register its schema in this registry if it belongs here, then replay it with `outbox dlq:replay`.'
  );
}

/**
 * A replay is for one consumer (x-replay-consumer): the dead-letter topic is shared by every consumer of
 * the aggregate type, the original topic too, and another consumer's inbox row of the event may be
 * pruned by now. Any other router skips it: no handler, no inbox row, no dead letter; its offset moves on.
 */
function replayedForOther(message: KafkaMessage, deps: RouterDeps): ((where: Where) => Prepared) | undefined {
  const target = headerText(message.headers, DLQ_HEADER.replayConsumer);
  if (target === undefined || target === deps.consumer) return undefined;
  return (where) => {
    deps.emit('router.replay-skipped', { ...whereOf(where), id: headerText(message.headers, (deps.envelope ?? DEFAULT_ENVELOPE).idHeader), for: target });
    return { ...where, kind: 'skip', reason: `a replay for consumer ${JSON.stringify(target)}, not this one (${JSON.stringify(deps.consumer)})` };
  };
}

/** Has this record no handler, under the `block` policy for unknown event types? Read from its headers alone. */
export function blocksLane(topic: string, message: KafkaMessage, deps: RouterDeps): boolean {
  const aggregateType = deps.aggregateTypeOf(topic);
  if ((deps.unknownEventTypes?.[aggregateType] ?? deps.unknownEventType) !== 'block') return false;
  const envelope = deps.envelope ?? DEFAULT_ENVELOPE;
  // A type in a value field is known only after decoding: prepareRecord blocks such a record itself.
  if (envelope.eventTypeField !== undefined) return false;
  const eventType = headerText(message.headers, envelope.eventTypeHeader);
  return eventType === undefined || deps.handlers[aggregateType]?.[eventType] === undefined;
}

/** The zod schema for this event: the only one, or the version its `schemaVersion` header names (the lowest without one). */
function payloadSchemaFor(declared: PayloadSchema, extra: Readonly<Record<string, string>>, name: string): { schema: ZodType; label: string } {
  if (!('versions' in declared) || typeof (declared as { safeParse?: unknown }).safeParse === 'function') return { schema: declared as ZodType, label: name };
  const versions = declared.versions;
  const known = Object.keys(versions).sort((a, b) => Number(a) - Number(b) || a.localeCompare(b));
  const version = extra[SCHEMA_VERSION_HEADER] ?? known[0];
  const schema = version !== undefined && Object.hasOwn(versions, version) ? versions[version] : undefined;
  if (!schema) {
    throw new OutboxError(
      'PAYLOAD_INVALID',
      `The ${name} payload says ${SCHEMA_VERSION_HEADER} ${JSON.stringify(version)}, but payloadSchemas.${name}.versions has ${known.length ? known.join(', ') : 'none'}. ` +
        'Add that version to payloadSchemas (deploy consumers before producers write it), then replay the dead letter.',
    );
  }
  return { schema, label: `${name} (schema version ${version})` };
}

function failureOf(error: unknown): Failure {
  return { code: isOutboxError(error) ? error.code : 'DECODE_FAILED', message: messageOf(error), attempts: 1 };
}
