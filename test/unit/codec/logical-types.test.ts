/** src/codec/logical-types.ts: timestamp-millis ↔ Date. */
import { Type } from 'avsc';
import { parseAvroType } from '../../../src/codec/logical-types';

const schema = { type: 'record', name: 'T', fields: [{ name: 'at', type: { type: 'long', logicalType: 'timestamp-millis' } }] };

describe('timestamp-millis logical type', () => {
  const type = parseAvroType(schema);
  const at = new Date('2026-11-30T12:34:56.789Z');

  it('encodes a Date and decodes it back as a Date', () => {
    const decoded = type.fromBuffer(type.toBuffer({ at }));
    expect(decoded.at).toBeInstanceOf(Date);
    expect(decoded.at.toISOString()).toBe('2026-11-30T12:34:56.789Z');
  });

  it('accepts epoch milliseconds as a number and still decodes a Date', () => {
    const decoded = type.fromBuffer(type.toBuffer({ at: at.getTime() }));
    expect(decoded.at).toEqual(at);
  });

  it.each([['an invalid Date', new Date('nope')], ['a fractional number', 1.5], ['an ISO string', at.toISOString()], ['undefined', undefined]])('rejects %s', (_what, value) => {
    expect(type.isValid({ at: value })).toBe(false);
  });

  it('is the same bytes as a plain long, so non-Node consumers read it', () => {
    const plain = Type.forSchema({ type: 'record', name: 'T', fields: [{ name: 'at', type: 'long' }] });
    expect(type.toBuffer({ at })).toEqual(plain.toBuffer({ at: at.getTime() }));
  });

  it('reads data written as a plain long into a Date (schema resolution)', () => {
    const plain = Type.forSchema({ type: 'record', name: 'T', fields: [{ name: 'at', type: 'long' }] });
    const decoded = type.fromBuffer(plain.toBuffer({ at: at.getTime() }), type.createResolver(plain));
    expect(decoded.at).toEqual(at);
  });
});
