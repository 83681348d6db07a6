/** src/codec/compatibility.ts: field-level BACKWARD/FORWARD analysis, cross-checked against avsc's resolver. */
import type { Type } from 'avsc';
import { compatibilityIssues } from '../../../src/codec';
import { parseAvroType } from '../../../src/codec/logical-types';
import { orderCreatedJson } from './temp-schemas';

type Fields = Record<string, unknown>[];
const record = (fields: Fields, extra: Record<string, unknown> = {}) => parseAvroType({ type: 'record', name: 'Evt', namespace: 'dev.t', fields, ...extra });
const status = { type: 'enum', name: 'Status', symbols: ['NEW', 'PAID', 'SHIPPED'] };

/** Avro's own answer (avsc implements the spec's resolution rules): does reading throw? */
function avscCanRead(reader: Type, writer: Type): boolean {
  try {
    reader.createResolver(writer);
    return true;
  } catch {
    return false;
  }
}

const cases: [string, Fields, Fields, string[]][] = [
  ['identical', [{ name: 'a', type: 'string' }], [{ name: 'a', type: 'string' }], []],
  ['a field added without a default', [{ name: 'a', type: 'string' }], [{ name: 'a', type: 'string' }, { name: 'channel', type: 'string' }], ['Evt.channel: added without a default']],
  ['a field added with a default', [{ name: 'a', type: 'string' }], [{ name: 'a', type: 'string' }, { name: 'note', type: ['null', 'string'], default: null }], []],
  ['a field removed', [{ name: 'a', type: 'string' }, { name: 'b', type: 'int' }], [{ name: 'a', type: 'string' }], []],
  ['int promoted to long', [{ name: 'n', type: 'int' }], [{ name: 'n', type: 'long' }], []],
  ['long narrowed to int', [{ name: 'n', type: 'long' }], [{ name: 'n', type: 'int' }], ['Evt.n: type changed from long to int; Avro cannot read long data as int']],
  ['string to bytes', [{ name: 's', type: 'string' }], [{ name: 's', type: 'bytes' }], []],
  ['string to int', [{ name: 's', type: 'string' }], [{ name: 's', type: 'int' }], ['Evt.s: type changed from string to int; Avro cannot read string data as int']],
  ['an enum symbol removed', [{ name: 'st', type: status }], [{ name: 'st', type: { ...status, symbols: ['NEW', 'PAID'] } }], ['Evt.st: enum symbol SHIPPED removed (data written with the registered schema may hold it)']],
  ['an enum symbol removed, with an enum default', [{ name: 'st', type: status }], [{ name: 'st', type: { ...status, symbols: ['NEW', 'PAID'], default: 'NEW' } }], []],
  ['an enum symbol added', [{ name: 'st', type: status }], [{ name: 'st', type: { ...status, symbols: [...status.symbols, 'LOST'] } }], []],
  ['a field made optional', [{ name: 's', type: 'string' }], [{ name: 's', type: ['null', 'string'], default: null }], []],
  ['an optional field made required', [{ name: 's', type: ['null', 'string'], default: null }], [{ name: 's', type: 'string' }], ['Evt.s: the registered type [null, string] may hold null, which the local type string cannot read']],
  ['a field renamed with an alias', [{ name: 'old', type: 'string' }], [{ name: 'renamed', type: 'string', aliases: ['old'] }], []],
  ['a fixed size changed', [{ name: 'f', type: { type: 'fixed', name: 'F', size: 4 } }], [{ name: 'f', type: { type: 'fixed', name: 'F', size: 8 } }], ['Evt.f: fixed size changed from 4 to 8 bytes']],
  ['timestamp-millis over a plain long', [{ name: 't', type: 'long' }], [{ name: 't', type: { type: 'long', logicalType: 'timestamp-millis' } }], []],
  [
    'a nested array item field narrowed',
    [{ name: 'lines', type: { type: 'array', items: { type: 'record', name: 'Line', fields: [{ name: 'q', type: 'long' }] } } }],
    [{ name: 'lines', type: { type: 'array', items: { type: 'record', name: 'Line', fields: [{ name: 'q', type: 'int' }] } } }],
    ['Evt.lines[].q: type changed from long to int; Avro cannot read long data as int'],
  ],
];

describe('BACKWARD analysis (local reads registered)', () => {
  it.each(cases)('%s', (_what, registered, local, expected) => {
    const [r, l] = [record(registered), record(local)];
    const issues = compatibilityIssues(l, r, 'backward');
    expect(issues.map((i) => `${i.path}: ${i.problem}`)).toEqual(expected);
    expect(issues.every((i) => i.fix.length > 10)).toBe(true);
    // The analysis agrees with Avro itself on whether the data can be read at all.
    expect(avscCanRead(l, r)).toBe(expected.length === 0);
  });

  it('names several fields of the shipped OrderCreated at once, with a copy-pastable fix', () => {
    const registered = orderCreatedJson();
    const local = { ...registered, fields: [...registered.fields.filter((f) => f.name !== 'totalCents'), { name: 'totalCents', type: 'int' }, { name: 'channel', type: 'string' }] };
    const issues = compatibilityIssues(parseAvroType(local), parseAvroType(registered), 'backward');
    expect(issues.map((i) => i.path)).toEqual(['OrderCreated.totalCents', 'OrderCreated.channel']);
    expect(issues[1]?.fix).toContain('"type": ["null", "string"], "default": null');
  });

  it('flags a renamed record and suggests an alias', () => {
    const issues = compatibilityIssues(parseAvroType({ type: 'record', name: 'New', fields: [] }), parseAvroType({ type: 'record', name: 'Old', fields: [] }), 'backward');
    expect(issues).toEqual([expect.objectContaining({ path: 'New', problem: 'record renamed from Old to New' })]);
    expect(issues[0]?.fix).toContain('"aliases": ["Old"]');
  });
});

describe('FORWARD analysis (registered reads local)', () => {
  it('reports a removed field the registered schema requires', () => {
    const registered = record([{ name: 'a', type: 'string' }, { name: 'b', type: 'int' }]);
    const local = record([{ name: 'a', type: 'string' }]);
    expect(compatibilityIssues(registered, local, 'forward')).toEqual([
      expect.objectContaining({ path: 'Evt.b', problem: 'removed, but the registered schema has no default for it' }),
    ]);
  });

  it('reports an added enum symbol old readers do not know, and words type changes from registered to local', () => {
    const registered = record([{ name: 'st', type: status }, { name: 'n', type: 'long' }]);
    const local = record([{ name: 'st', type: { ...status, symbols: [...status.symbols, 'LOST'] } }, { name: 'n', type: 'double' }]);
    const problems = compatibilityIssues(registered, local, 'forward').map((i) => `${i.path}: ${i.problem}`);
    expect(problems).toEqual([
      'Evt.st: enum symbol LOST added (readers of the registered schema do not know it)',
      'Evt.n: type changed from long to double; Avro cannot read double data as long',
    ]);
  });
});

describe('recursive types', () => {
  it('terminates and still finds the change', () => {
    const node = (valueType: string) => ({ type: 'record', name: 'Node', fields: [{ name: 'v', type: valueType }, { name: 'next', type: ['null', 'Node'], default: null }] });
    const issues = compatibilityIssues(parseAvroType(node('int')), parseAvroType(node('long')), 'backward');
    expect(issues.map((i) => i.path)).toEqual(['Node.v']);
  });
});
