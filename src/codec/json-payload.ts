import { OutboxError } from '../errors';
import { describeValue, formatPath } from './describe';

/**
 * JSON payloads: `JSON.stringify` silently turns some values into something else (a function or a
 * symbol disappears, NaN becomes null, a Map becomes {}, `undefined` in an array becomes null) and throws
 * on others (BigInt, cycles). Each of these is rejected with the field's path instead. An object property
 * whose value is `undefined` is the one loss accepted: it is how TypeScript spells an absent optional
 * field, and JSON omits it the same way.
 */
export function encodeJsonPayload(payload: unknown, what: string): Buffer {
  const problems: string[] = [];
  check(payload, [], new Set(), problems);
  if (problems.length > 0) {
    throw new OutboxError(
      'PAYLOAD_INVALID',
      `The ${what} payload cannot be written as application/json:\n${problems.map((p) => `  - ${p}`).join('\n')}\n` +
        'Convert those values to strings, numbers, booleans, null, plain objects or arrays (a BigInt to a string, a Map to an object).',
      { details: { problems } },
    );
  }
  return Buffer.from(JSON.stringify(payload), 'utf8');
}

function check(value: unknown, path: string[], ancestors: Set<object>, problems: string[]): void {
  const at = formatPath(path);
  if (value === undefined) {
    problems.push(`${at}: undefined ${path.length ? '(in an array it would become null)' : '(there is no payload)'}`);
    return;
  }
  if (typeof value === 'function' || typeof value === 'symbol' || typeof value === 'bigint') {
    problems.push(`${at}: ${describeValue(value)} has no JSON form`);
    return;
  }
  if (typeof value === 'number' && !Number.isFinite(value)) {
    problems.push(`${at}: number ${value} would become null`);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') {
    // Date, Buffer and user classes decide their own JSON form: check that instead.
    return check(toJSON.call(value), path, ancestors, problems);
  }
  if (value instanceof Map || value instanceof Set || ArrayBuffer.isView(value)) {
    problems.push(`${at}: ${value.constructor.name} would become ${value instanceof Map || value instanceof Set ? '{}' : 'an object of indices'}`);
    return;
  }
  if (ancestors.has(value)) {
    problems.push(`${at}: refers back to one of its parents (a cycle)`);
    return;
  }
  ancestors.add(value);
  if (Array.isArray(value)) {
    value.forEach((item, i) => check(item, [...path, String(i)], ancestors, problems));
  } else {
    for (const [key, item] of Object.entries(value)) {
      if (item !== undefined) check(item, [...path, key], ancestors, problems);
    }
  }
  ancestors.delete(value);
}

export function decodeJsonPayload(bytes: Buffer): unknown {
  if (!Buffer.isBuffer(bytes) || bytes.length === 0) {
    throw new OutboxError('DECODE_FAILED', `Cannot decode the JSON payload: it is ${Buffer.isBuffer(bytes) ? 'empty' : `a ${typeof bytes}, not a Buffer`}.`, {
      details: { reason: 'json' },
    });
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch (error) {
    throw new OutboxError('DECODE_FAILED', 'Cannot decode the JSON payload: it is not UTF-8 text (was it Avro under a JSON contentType header?).', {
      cause: error,
      details: { reason: 'json' },
    });
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    const preview = text.length > 60 ? `${text.slice(0, 60)}…` : text;
    throw new OutboxError('DECODE_FAILED', `Cannot decode the JSON payload: ${(error as Error).message}. It starts with ${JSON.stringify(preview)}.`, {
      cause: error,
      details: { reason: 'json' },
    });
  }
}
