import type { KafkaMessage } from 'kafkajs';
import type { ZodType } from 'zod';
import { isOutboxError, OutboxError } from '../errors';
import { parse } from '../config/parse';
import { DLQ_HEADER, HEADER, headerText, parseRecordHeaders, SCHEMA_VERSION_HEADER, type RecordHeaders } from '../envelope';
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

  let headers: RecordHeaders;
  try {
    headers = parseRecordHeaders(message.headers);
    if (message.value === null || message.value === undefined) {
      throw new OutboxError('RECORD_INVALID', 'The record has no value (a tombstone?); routed outbox records always carry the payload.', {});
    }
  } catch (error) {
    return deadLetter(failureOf(error));
  }
  const handler = deps.handlers[aggregateType]?.[headers.eventType];
  if (!handler) {
    const known = Object.keys(deps.handlers[aggregateType] ?? {});
    const reason = `No handler for aggregate type ${JSON.stringify(aggregateType)}, event type ${JSON.stringify(headers.eventType)}; handled here: ${known.length ? known.join(', ') : '(none for this aggregate type)'}.`;
    const policy = deps.unknownEventTypes?.[aggregateType] ?? deps.unknownEventType ?? 'dead-letter';
    if (policy === 'skip') return { ...where, kind: 'skip', reason };
    if (policy === 'block') return { ...where, kind: 'block', reason, eventId: headers.id };
    return deadLetter({ code: 'HANDLER_NOT_FOUND', message: reason, attempts: 1 }, headers.id);
  }

  let payload: unknown;
  for (let wait = 1; ; wait++) {
    try {
      // The consumer's reader schema when the codec has one (Avro schema resolution), else the writer's.
      payload = await deps.codec.decode(message.value as Buffer, headers.contentType, { reader: { aggregateType, eventType: headers.eventType } });
      break;
    } catch (error) {
      if (!(isOutboxError(error) && error.retriable)) return deadLetter(failureOf(error), headers.id);
      if (!(await waitForInfrastructure(error, wait, whereOf(where), deps, scope))) return { kind: 'aborted' };
    }
  }

  const declared = deps.payloadSchemas?.[aggregateType]?.[headers.eventType];
  if (declared) {
    try {
      const { schema, label } = payloadSchemaFor(declared, headers.extra, `${aggregateType}.${headers.eventType}`);
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
    type: headers.eventType,
    payload,
    headers: headers.extra,
    traceparent: headers.traceparent,
    createdAt: message.timestamp ? new Date(Number(message.timestamp)) : undefined,
  };
  return { ...where, kind: 'ready', event, handler, replayed: headerText(message.headers, REPLAY_HEADER) !== undefined };
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
    deps.emit('router.replay-skipped', { ...whereOf(where), id: headerText(message.headers, HEADER.id), for: target });
    return { ...where, kind: 'skip', reason: `a replay for consumer ${JSON.stringify(target)}, not this one (${JSON.stringify(deps.consumer)})` };
  };
}

/** Has this record no handler, under the `block` policy for unknown event types? Read from its headers alone. */
export function blocksLane(topic: string, message: KafkaMessage, deps: RouterDeps): boolean {
  const aggregateType = deps.aggregateTypeOf(topic);
  if ((deps.unknownEventTypes?.[aggregateType] ?? deps.unknownEventType) !== 'block') return false;
  const eventType = headerText(message.headers, HEADER.eventType);
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
