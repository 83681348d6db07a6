import { Type } from 'avsc';
import { typeLabel } from './describe';

/**
 * Field-level compatibility analysis, following Avro's schema resolution rules: can a reader schema
 * read data written with a writer schema? The registry's compatibility endpoint only answers yes or no
 * (Apicurio ignores `?verbose=true`), so this names the offending fields and how to fix each.
 *
 * `backward` (the registry's default): the local schema reads data written with the registered one.
 * `forward`: the registered schema reads data written with the local one. FULL checks both.
 */
export type Direction = 'backward' | 'forward';

export interface CompatIssue {
  /** `OrderCreated.lines[].quantity`: the record's name, then field names; `[]` array items, `{}` map values. */
  path: string;
  problem: string;
  fix: string;
}

type AnyType = Type & {
  fields?: { name: string; aliases: string[]; type: Type; defaultValue(): unknown }[];
  symbols?: string[];
  default?: string;
  size?: number;
  itemsType?: Type;
  valuesType?: Type;
  types?: Type[];
  underlyingType?: Type;
  aliases?: string[];
};

/** Writer type → reader types that can read it (Avro's promotions). */
const PROMOTIONS: Record<string, string[]> = {
  int: ['long', 'float', 'double'],
  long: ['float', 'double'],
  float: ['double'],
  string: ['bytes'],
  bytes: ['string'],
};

const NAMED = new Set(['record', 'error', 'enum', 'fixed']);

export function compatibilityIssues(reader: Type, writer: Type, direction: Direction): CompatIssue[] {
  const issues: CompatIssue[] = [];
  const seen = new Set<string>();
  const rootName = shortName(reader.name ?? writer.name ?? 'payload');
  // Messages speak of "registered" and "local" whichever side reads.
  const registered = (r: string, w: string) => (direction === 'backward' ? w : r);
  const local = (r: string, w: string) => (direction === 'backward' ? r : w);

  const visit = (rIn: Type, wIn: Type, path: string): void => {
    const r = unlogical(rIn);
    const w = unlogical(wIn);
    if (isUnion(w)) {
      for (const branch of w.types ?? []) {
        const target = isUnion(r) ? (r.types ?? []).find((rb) => shallowMatch(rb, branch)) : shallowMatch(r, branch) ? r : undefined;
        if (target) visit(target, branch, path);
        else
          issues.push({
            path,
            problem:
              direction === 'backward'
                ? `the registered type ${typeLabel(wIn)} may hold ${typeLabel(branch)}, which the local type ${typeLabel(rIn)} cannot read`
                : `the local type ${typeLabel(wIn)} may hold ${typeLabel(branch)}, which the registered type ${typeLabel(rIn)} cannot read`,
            fix: `keep ${typeLabel(branch)} among the accepted types`,
          });
      }
      return;
    }
    if (isUnion(r)) {
      const target = (r.types ?? []).find((rb) => shallowMatch(rb, w));
      if (target) return visit(target, w, path);
      return void issues.push(typeChange(path, rIn, wIn));
    }
    if (!shallowMatch(r, w)) {
      if (NAMED.has(r.typeName) && r.typeName === w.typeName) {
        const [from, to] = [registered(r.name ?? '', w.name ?? ''), local(r.name ?? '', w.name ?? '')];
        issues.push({ path, problem: `${r.typeName} renamed from ${from} to ${to}`, fix: `keep the name ${from}, or add "aliases": ["${from}"] to ${shortName(to)}` });
      } else {
        return void issues.push(typeChange(path, rIn, wIn));
      }
    }
    switch (r.typeName) {
      case 'record':
      case 'error':
        return visitRecord(r, w, path);
      case 'enum': {
        const missing = (w.symbols ?? []).filter((s) => !(r.symbols ?? []).includes(s));
        if (missing.length && r.default === undefined) {
          issues.push({
            path,
            problem:
              direction === 'backward'
                ? `enum symbol${missing.length > 1 ? 's' : ''} ${missing.join(', ')} removed (data written with the registered schema may hold ${missing.length > 1 ? 'them' : 'it'})`
                : `enum symbol${missing.length > 1 ? 's' : ''} ${missing.join(', ')} added (readers of the registered schema do not know ${missing.length > 1 ? 'them' : 'it'})`,
            fix: direction === 'backward' ? 'keep the symbol, or give the enum a "default" symbol' : 'first register a version whose enum has a "default" symbol',
          });
        }
        return;
      }
      case 'fixed':
        if (r.size !== w.size) issues.push({ path, problem: `fixed size changed from ${registered(String(r.size), String(w.size))} to ${local(String(r.size), String(w.size))} bytes`, fix: 'keep the size, or add a new field' });
        return;
      case 'array':
        return visit(r.itemsType as Type, w.itemsType as Type, `${path}[]`);
      case 'map':
        return visit(r.valuesType as Type, w.valuesType as Type, `${path}{}`);
      default:
        return;
    }
  };

  const visitRecord = (r: AnyType, w: AnyType, path: string): void => {
    const key = `${r.name}|${w.name}`;
    if (seen.has(key)) return; // recursive types: each pair once
    seen.add(key);
    for (const field of r.fields ?? []) {
      const match = (w.fields ?? []).find((wf) => wf.name === field.name || field.aliases.includes(wf.name));
      const at = `${path}.${field.name}`;
      if (match) visit(field.type, match.type, at);
      else if (field.defaultValue() === undefined) {
        issues.push(
          direction === 'backward'
            ? { path: at, problem: 'added without a default', fix: `give it a "default" (an optional field: "type": ["null", ${JSON.stringify(field.type.name ?? field.type.schema())}], "default": null)` }
            : { path: at, problem: 'removed, but the registered schema has no default for it', fix: 'keep the field, or first register a version that gives it a "default"' },
        );
      }
    }
  };

  const typeChange = (path: string, r: Type, w: Type): CompatIssue => ({
    path,
    problem: `type changed from ${registered(typeLabel(r), typeLabel(w))} to ${local(typeLabel(r), typeLabel(w))}; Avro cannot read ${typeLabel(w)} data as ${typeLabel(r)}`,
    fix: 'use a type Avro promotes to (int → long → float → double, string ↔ bytes), or add a new field instead',
  });

  visit(reader, writer, rootName);
  return issues;
}

function unlogical(type: Type): AnyType {
  const t = type as AnyType;
  return t.typeName.startsWith('logical:') && t.underlyingType ? unlogical(t.underlyingType) : t;
}

function isUnion(type: AnyType): boolean {
  return type.typeName.startsWith('union');
}

/** Same kind of type, ignoring contents: what Avro uses to pick a union branch. */
function shallowMatch(readerIn: Type, writerIn: Type): boolean {
  const r = unlogical(readerIn);
  const w = unlogical(writerIn);
  if (isUnion(r) || isUnion(w)) return false;
  if (NAMED.has(r.typeName)) {
    const names = [r.name, ...(r.aliases ?? [])].map((n) => shortName(n ?? ''));
    return r.typeName === w.typeName && names.includes(shortName(w.name ?? ''));
  }
  return r.typeName === w.typeName || (PROMOTIONS[w.typeName] ?? []).includes(r.typeName);
}

function shortName(name: string): string {
  return name.split('.').pop() ?? name;
}
