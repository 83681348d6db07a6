/** src/codec/wire-format.ts: Confluent framing, 0x00 + 4-byte big-endian id + body. */
import { frameConfluent, MAGIC_BYTE, unframeConfluent } from '../../../src/codec';
import { OutboxError } from '../../../src/errors';

describe('Confluent wire format', () => {
  it('frames a body with the magic byte and the id as a big-endian int32', () => {
    const framed = frameConfluent(0x01020304, Buffer.from([0xaa, 0xbb]));
    expect([...framed]).toEqual([MAGIC_BYTE, 0x01, 0x02, 0x03, 0x04, 0xaa, 0xbb]);
  });

  it('unframes what it framed, for small and the largest ids', () => {
    for (const id of [1, 42, 0x7fffffff]) {
      const { schemaId, body } = unframeConfluent(frameConfluent(id, Buffer.from('body')));
      expect(schemaId).toBe(id);
      expect(body.toString()).toBe('body');
    }
  });

  it('refuses ids the format cannot carry', () => {
    expect(() => frameConfluent(0, Buffer.alloc(0))).toThrow(RangeError);
    expect(() => frameConfluent(2 ** 31, Buffer.alloc(0))).toThrow(RangeError);
    expect(() => frameConfluent(1.5, Buffer.alloc(0))).toThrow(RangeError);
  });

  it.each([
    ['too short', Buffer.from([0, 0, 0]), /it is 3 bytes long; the header alone is 5 bytes/],
    ['the wrong magic byte', Buffer.from([1, 0, 0, 0, 1, 2]), /first byte is 0x01, not the magic byte 0x00/],
    ['JSON', Buffer.from('{"orderId":"o-1"}'), /0x7b, not the magic byte 0x00 \(it looks like JSON: check the contentType header\)/],
    ['a negative id', Buffer.from([0, 0xff, 0xff, 0xff, 0xff, 1]), /schema id -1 is not a valid registry id/],
  ])('rejects %s as DECODE_FAILED, not retriable', (_what, bytes, pattern) => {
    let error: unknown;
    try {
      unframeConfluent(bytes);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(OutboxError);
    expect((error as OutboxError).code).toBe('DECODE_FAILED');
    expect((error as OutboxError).retriable).toBe(false);
    expect((error as OutboxError).message).toMatch(pattern);
  });
});
