/** src/codec/json-payload.ts: JSON payloads that survive the round trip unchanged, or a named error. */
import { decodeJsonPayload, encodeJsonPayload } from '../../../src/codec/json-payload';
import { OutboxError } from '../../../src/errors';

function rejected(payload: unknown): OutboxError {
  try {
    encodeJsonPayload(payload, 'order/OrderNoted');
  } catch (error) {
    if (error instanceof OutboxError) return error;
    throw error;
  }
  throw new Error('expected PAYLOAD_INVALID');
}

describe('JSON payloads', () => {
  it('encodes JSON.stringify output as UTF-8, Dates as ISO strings', () => {
    const bytes = encodeJsonPayload({ note: 'café', at: new Date('2026-11-30T00:00:00Z'), n: [1, null] }, 'x');
    expect(bytes.toString('utf8')).toBe('{"note":"café","at":"2026-11-30T00:00:00.000Z","n":[1,null]}');
  });

  it('omits an undefined object property, as JSON and TypeScript optional fields do', () => {
    expect(encodeJsonPayload({ a: 1, b: undefined }, 'x').toString()).toBe('{"a":1}');
  });

  it.each([
    ['undefined', undefined, '(the payload itself): undefined (there is no payload)'],
    ['a function', { cb: () => 1 }, 'cb: a function has no JSON form'],
    ['a BigInt', { total: { cents: 10n } }, 'total.cents: bigint 10n has no JSON form'],
    ['a symbol', { s: Symbol('x') }, 's: symbol has no JSON form'],
    ['NaN', { ratio: Number.NaN }, 'ratio: number NaN would become null'],
    ['undefined in an array', { items: [1, undefined] }, 'items[1]: undefined (in an array it would become null)'],
    ['a Map', { m: new Map([[1, 2]]) }, 'm: Map would become {}'],
  ])('rejects %s, naming the path', (_what, payload, message) => {
    const error = rejected(payload);
    expect(error.code).toBe('PAYLOAD_INVALID');
    expect(error.retriable).toBe(false);
    expect(error.message).toContain(message);
    expect(error.message).toContain('order/OrderNoted');
  });

  it('rejects a cycle instead of throwing a TypeError', () => {
    const a: Record<string, unknown> = { name: 'a' };
    a.self = { parent: a };
    expect(rejected(a).message).toContain('self.parent: refers back to one of its parents (a cycle)');
  });

  it('accepts the same object twice when it is not a cycle', () => {
    const shared = { x: 1 };
    expect(encodeJsonPayload({ a: shared, b: shared }, 'x').toString()).toBe('{"a":{"x":1},"b":{"x":1}}');
  });

  it('decodes what it encoded', () => {
    expect(decodeJsonPayload(encodeJsonPayload({ a: [1, 'two', { three: true }] }, 'x'))).toEqual({ a: [1, 'two', { three: true }] });
  });

  it.each([
    ['bad JSON', Buffer.from('{"a":'), /Cannot decode the JSON payload: .*It starts with "\{\\"a\\":"/],
    ['an empty buffer', Buffer.alloc(0), /it is empty/],
    ['invalid UTF-8 (e.g. Avro bytes)', Buffer.from([0, 0, 0, 0, 1, 0xff, 0xfe]), /not UTF-8 text/],
  ])('rejects %s as DECODE_FAILED', (_what, bytes, pattern) => {
    expect(() => decodeJsonPayload(bytes)).toThrow(expect.objectContaining({ code: 'DECODE_FAILED', retriable: false, message: expect.stringMatching(pattern) }));
  });
});
