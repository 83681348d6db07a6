import { Type, types, type ForSchemaOptions } from 'avsc';

/**
 * `timestamp-millis` as a JS Date. Encoding also takes epoch milliseconds (a safe integer), because
 * payloads often come from JSON or SQL where a timestamp is already a number; decoding always yields a
 * Date so consumers see one shape.
 */
export class TimestampMillisType extends types.LogicalType {
  protected override _fromValue(value: number): Date {
    return new Date(value);
  }

  protected override _toValue(value: unknown): number | undefined {
    if (value instanceof Date) {
      const ms = value.getTime();
      return Number.isNaN(ms) ? undefined : ms;
    }
    return typeof value === 'number' && Number.isSafeInteger(value) ? value : undefined;
  }

  protected override _resolve(writer: Type): ((value: number) => Date) | undefined {
    // A plain long written by an older schema reads as a Date too (avsc's documented DateType pattern).
    if (Type.isType(writer, 'long', 'logical:timestamp-millis')) return (value) => this._fromValue(value);
    return undefined;
  }
}

/**
 * The one set of avsc options for every schema the codec parses, local or fetched from the registry:
 * writer and reader types must agree on logical types or a Date would round-trip as a number.
 */
export function avroTypeOptions(): Partial<ForSchemaOptions> {
  return { logicalTypes: { 'timestamp-millis': TimestampMillisType }, wrapUnions: 'auto' };
}

/** Parses a schema with the codec's options in a fresh name registry (each .avsc stands alone). */
export function parseAvroType(schema: unknown): Type {
  return Type.forSchema(schema as never, { ...avroTypeOptions(), registry: {} });
}
