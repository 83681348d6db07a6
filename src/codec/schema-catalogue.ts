import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import type { Type } from 'avsc';
import { OutboxError } from '../errors';
import { PACKAGE_ROOT as PROJECT_ROOT } from '../assets';
import { parseAvroType } from './logical-types';

/** One `schemas/<aggregate_type>/<EventType>.avsc`, parsed. */
export interface LocalSchema {
  aggregateType: string;
  eventType: string;
  file: string;
  /** `namespace.name` of the top-level record: the second half of the subject name. */
  fullName: string;
  /** The file's JSON re-serialised: what is sent to the registry, so reformatting a file is not a new version. */
  text: string;
  type: Type;
}

export interface SchemaCatalogue {
  readonly dir: string;
  /** Throws EVENT_TYPE_UNKNOWN naming what exists, so a typo in an event type is obvious. */
  get(aggregateType: string, eventType: string): LocalSchema;
  find(aggregateType: string, eventType: string): LocalSchema | undefined;
  list(): readonly LocalSchema[];
}

export interface SchemaCatalogueOptions {
  /** Default: the project's `schemas/` folder. */
  schemasDir?: string;
}

export function defaultSchemasDir(): string {
  return join(PROJECT_ROOT, 'schemas');
}

/**
 * Reads the folder on first use, not at creation: a JSON-only writer never needs it, and a process that
 * starts before the schemas are checked out still starts. A malformed file fails every use until fixed.
 */
export function createSchemaCatalogue(options: SchemaCatalogueOptions = {}): SchemaCatalogue {
  const dir = options.schemasDir ?? defaultSchemasDir();
  let loaded: Map<string, LocalSchema> | undefined;
  const all = (): Map<string, LocalSchema> => (loaded ??= loadDir(dir));
  const key = (aggregateType: string, eventType: string) => `${aggregateType}/${eventType}`;

  return {
    dir,
    find: (aggregateType, eventType) => all().get(key(aggregateType, eventType)),
    get(aggregateType, eventType) {
      const found = all().get(key(aggregateType, eventType));
      if (found) return found;
      const known = [...all().keys()];
      const expected = join(dir, aggregateType, `${eventType}.avsc`);
      throw new OutboxError(
        'EVENT_TYPE_UNKNOWN',
        `No Avro schema for event type "${eventType}" of aggregate type "${aggregateType}": expected ${expected}. ` +
          (known.length ? `Schemas found in ${dir}: ${known.join(', ')}.` : `${dir} has no schemas${existsSync(dir) ? '' : ' (the folder does not exist)'}.`) +
          ' Fix the event type, add the .avsc file and run `outbox schemas:register`, or write the event as application/json.',
        { details: { aggregateType, eventType, schemasDir: dir, known } },
      );
    },
    list: () => [...all().values()],
  };
}

function loadDir(dir: string): Map<string, LocalSchema> {
  const schemas = new Map<string, LocalSchema>();
  if (!existsSync(dir)) return schemas;
  for (const entry of readdirSync(dir).sort()) {
    const path = join(dir, entry);
    if (!statSync(path).isDirectory()) {
      if (entry.endsWith('.avsc')) {
        throw invalid(path, dir, `it must be in a folder named for its aggregate type (${join(dir, '<aggregate_type>', entry)})`);
      }
      continue;
    }
    for (const file of readdirSync(path).sort()) {
      if (!file.endsWith('.avsc')) continue;
      const schema = loadSchemaFile(join(path, file), entry, basename(file, '.avsc'), dir);
      schemas.set(`${schema.aggregateType}/${schema.eventType}`, schema);
    }
  }
  return schemas;
}

/** Parses one .avsc; every failure is SCHEMA_INVALID naming the file and what is wrong with it. */
export function loadSchemaFile(file: string, aggregateType: string, eventType: string, root = defaultSchemasDir()): LocalSchema {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw invalid(file, root, `it is not valid JSON (${(error as Error).message})`, error);
  }
  let type: Type;
  try {
    type = parseAvroType(json);
  } catch (error) {
    throw invalid(file, root, `it is not a valid Avro schema (${(error as Error).message})`, error);
  }
  if (type.typeName !== 'record') {
    throw invalid(file, root, `its top-level type is ${type.typeName}; an event schema must be a record`);
  }
  const fullName = type.name as string;
  const shortName = fullName.split('.').pop();
  // The event type names the file and the record alike, so the subject (record full name) is unambiguous.
  if (shortName !== eventType) {
    throw invalid(file, root, `its record is named "${shortName}" but the file name says "${eventType}"; rename one so they match`);
  }
  return { aggregateType, eventType, file, fullName, text: JSON.stringify(json), type };
}

function invalid(file: string, root: string, why: string, cause?: unknown): OutboxError {
  const shown = relative(process.cwd(), file).startsWith('..') ? file : relative(process.cwd(), file) || file;
  return new OutboxError('SCHEMA_INVALID', `Schema file ${shown} is unusable: ${why}. Fix the file (schemas folder: ${root}).`, {
    cause,
    details: { file },
  });
}
