import { Type } from 'avsc';
import { OutboxError } from '../errors';
import { describeType, describeValue, formatPath } from './describe';
import type { LocalSchema } from './schema-catalogue';

interface Problem {
  path: string;
  message: string;
}

/**
 * Checks a payload against its local schema before anything reaches the registry or the table, and names
 * every bad field at once: a writer fixing one field per failed request is slow. Fields the schema does
 * not declare are errors too: avsc would silently drop them, and a typo in an optional field's name
 * would lose its value without a trace.
 */
export function validateAvroPayload(schema: LocalSchema, payload: unknown): void {
  // Fast path on the writer's hot path: one strict pass for a valid payload; the two diagnostic passes
  // below (which name every bad field) run only for an invalid one.
  if (schema.type.isValid(payload, { noUndeclaredFields: true })) return;
  const problems = new Map<string, Problem>();
  const hook = (path: string[], value: unknown, type: Type) => {
    const at = formatPath(path);
    if (!problems.has(at)) problems.set(at, { path: at, message: `got ${describeValue(value)}, expected ${describeType(type)}` });
  };
  schema.type.isValid(payload, { errorHook: hook });
  // Second pass for keys the schema does not declare. With noUndeclaredFields avsc reports such a record
  // at its own path without looking inside it, so it is checked again without the extra keys.
  const undeclared = (value: unknown, type: Type, base: string[]): void => {
    type.isValid(value, {
      noUndeclaredFields: true,
      errorHook: (path, inner, innerType) => {
        const at = [...base, ...path];
        const extra = undeclaredKeys(inner, innerType);
        if (extra.length === 0) return hook(at, inner, innerType);
        const declared = (innerType as Type & { fields: { name: string }[] }).fields.map((f) => f.name).join(', ');
        for (const key of extra) {
          const where = formatPath([...at, key]);
          problems.set(where, { path: where, message: `not a field of ${innerType.name} (it has: ${declared})` });
        }
        const rest = Object.fromEntries(Object.entries(inner as object).filter(([key]) => !extra.includes(key)));
        undeclared(rest, innerType, at);
      },
    });
  };
  undeclared(payload, schema.type, []);
  if (problems.size === 0) return;
  const list = [...problems.values()];
  throw new OutboxError(
    'PAYLOAD_INVALID',
    `The ${schema.eventType} payload of aggregate type "${schema.aggregateType}" does not match ${schema.file} (${schema.fullName}):\n` +
      list.map((p) => `  - ${p.path}: ${p.message}`).join('\n') +
      '\nFix the payload, or change the schema (and run `outbox schemas:check`).',
    { details: { aggregateType: schema.aggregateType, eventType: schema.eventType, fields: list.map((p) => p.path) } },
  );
}

function undeclaredKeys(value: unknown, type: Type): string[] {
  if (!Type.isType(type, 'record') || value === null || typeof value !== 'object') return [];
  const declared = new Set((type as Type & { fields: { name: string }[] }).fields.map((f) => f.name));
  return Object.keys(value).filter((key) => !declared.has(key));
}
