import { Type } from 'avsc';

/** Human-readable Avro types and JS values for error messages: "got string \"12\", expected long". */
export function describeType(type: Type): string {
  const t = type as Type & { symbols?: string[]; itemsType?: Type; valuesType?: Type; types?: Type[]; size?: number; underlyingType?: Type };
  const name = type.typeName;
  if (name === 'logical:timestamp-millis') return 'timestamp-millis (a Date or integer epoch milliseconds)';
  if (name.startsWith('logical:')) return `${name.slice(8)} (${describeType(t.underlyingType as Type)})`;
  if (name === 'record' || name === 'error') return `record ${type.name}`;
  if (name === 'enum') return `enum ${type.name} (one of ${(t.symbols ?? []).join(', ')})`;
  if (name === 'fixed') return `fixed ${type.name} (Buffer of ${t.size} bytes)`;
  if (name === 'array') return `array of ${describeType(t.itemsType as Type)}`;
  if (name === 'map') return `map of ${describeType(t.valuesType as Type)}`;
  if (name.startsWith('union')) return (t.types ?? []).map(describeType).join(' | ');
  if (name === 'int') return 'int (32-bit integer)';
  if (name === 'long') return 'long (safe integer)';
  if (name === 'bytes') return 'bytes (Buffer)';
  return name;
}

/** Short name of a type for compatibility messages (no explanations, logical types by their name). */
export function typeLabel(type: Type): string {
  const t = type as Type & { itemsType?: Type; valuesType?: Type; types?: Type[] };
  const name = type.typeName;
  if (name.startsWith('logical:')) return name.slice(8);
  if (type.name) return `${name} ${type.name.split('.').pop()}`;
  if (name === 'array') return `array<${typeLabel(t.itemsType as Type)}>`;
  if (name === 'map') return `map<${typeLabel(t.valuesType as Type)}>`;
  if (name.startsWith('union')) return `[${(t.types ?? []).map(typeLabel).join(', ')}]`;
  return name;
}

export function describeValue(value: unknown): string {
  if (value === undefined) return 'undefined (missing)';
  if (value === null) return 'null';
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? 'an invalid Date' : `Date ${value.toISOString()}`;
  if (Buffer.isBuffer(value)) return `Buffer of ${value.length} bytes`;
  if (Array.isArray(value)) return `array of ${value.length}`;
  switch (typeof value) {
    case 'string':
      return `string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
    case 'number':
      return `number ${value}${Number.isInteger(value) && !Number.isSafeInteger(value) ? ' (beyond 2^53)' : ''}`;
    case 'bigint':
      return `bigint ${value}n`;
    case 'boolean':
      return `boolean ${value}`;
    case 'function':
      return 'a function';
    case 'object':
      return `object${value.constructor && value.constructor !== Object ? ` (${value.constructor.name})` : ''}`;
    default:
      return typeof value;
  }
}

/** ['lines', '0', 'quantity'] → `lines[0].quantity`. */
export function formatPath(path: readonly string[]): string {
  return path.reduce((out, part) => (/^\d+$/.test(part) ? `${out}[${part}]` : out ? `${out}.${part}` : part), '') || '(the payload itself)';
}
