import type { Logger } from '../log';
import { OutboxError } from '../errors';
import { compatibilityIssues, type CompatIssue, type Direction } from './compatibility';
import { parseAvroType } from './logical-types';
import { createRegistryConnection, type RegistryConnection, type RegistryConnectionOptions, type RegistrySettings } from './registry-connection';
import { createSchemaCatalogue, type LocalSchema } from './schema-catalogue';
import { topicNames } from '../topics';
import { topicRecordSubject, type TopicFor } from './subject-naming';

/** What the schema commands need from OutboxConfig; the connector's topic replacement names the subjects. */
export interface SchemaAdminConfig {
  registry: RegistrySettings;
  connector?: { topicReplacement?: string };
}

export interface SchemaAdminOptions extends RegistryConnectionOptions {
  schemasDir?: string;
  /** Default: from `config.connector.topicReplacement`, else `outbox.event.<aggregateType>`. */
  topicFor?: TopicFor;
  log?: Logger;
  connection?: RegistryConnection;
}

interface SchemaRef {
  subject: string;
  aggregateType: string;
  eventType: string;
  file: string;
}

export interface RegisterResult extends SchemaRef {
  id: number;
  version?: number;
  /** `registered`: a new version was created now; `unchanged`: this exact schema was already there. */
  status: 'registered' | 'unchanged';
}

export interface SchemaCheckResult extends SchemaRef {
  /** `new`: the subject has no versions yet (registering creates it; nothing to be compatible with). */
  status: 'new' | 'unchanged' | 'compatible' | 'incompatible';
  level?: string;
  registeredVersion?: number;
  registeredId?: number;
  /** The registry's own verdict (`POST /compatibility/...`); absent for new and unchanged subjects. */
  registryCompatible?: boolean;
  issues: CompatIssue[];
}

export interface SchemaCheckReport {
  ok: boolean;
  registry: string;
  schemasDir: string;
  results: SchemaCheckResult[];
}

function context(config: SchemaAdminConfig, options: SchemaAdminOptions) {
  const catalogue = createSchemaCatalogue({ schemasDir: options.schemasDir });
  const connection = options.connection ?? createRegistryConnection(config.registry, options);
  const topicFor = options.topicFor ?? topicNames(config.connector?.topicReplacement).routed;
  const refOf = (s: LocalSchema): SchemaRef => ({
    subject: topicRecordSubject(topicFor(s.aggregateType), s.fullName),
    aggregateType: s.aggregateType,
    eventType: s.eventType,
    file: s.file,
  });
  return { catalogue, connection, refOf };
}

/**
 * Registers every local schema under its subject. Idempotent: a schema already there keeps its id.
 * A schema the registry refuses does not stop the others; the refusals are thrown together at the
 * end as SCHEMA_INCOMPATIBLE, each with the offending fields.
 */
export async function registerSchemas(config: SchemaAdminConfig, options: SchemaAdminOptions = {}): Promise<RegisterResult[]> {
  const { catalogue, connection, refOf } = context(config, options);
  const results: RegisterResult[] = [];
  const refused: SchemaCheckResult[] = [];
  for (const schema of catalogue.list()) {
    const ref = refOf(schema);
    const existing = await connection.lookup(ref.subject, schema.text);
    if (existing) {
      results.push({ ...ref, id: existing.id, version: existing.version, status: 'unchanged' });
      options.log?.debug({ subject: ref.subject, id: existing.id }, `${ref.subject}: already registered (id ${existing.id}, version ${existing.version})`);
      continue;
    }
    try {
      const id = await connection.register(ref.subject, schema.text);
      const version = (await connection.lookup(ref.subject, schema.text))?.version;
      results.push({ ...ref, id, version, status: 'registered' });
      options.log?.debug({ subject: ref.subject, id }, `${ref.subject}: registered (id ${id}${version ? `, version ${version}` : ''})`);
    } catch (error) {
      if (!(error instanceof OutboxError && error.code === 'SCHEMA_INCOMPATIBLE')) throw error;
      refused.push(await checkOne(connection, schema, ref));
    }
  }
  if (refused.length > 0) {
    throw new OutboxError(
      'SCHEMA_INCOMPATIBLE',
      `The registry at ${connection.url} refused ${refused.length} schema${refused.length > 1 ? 's' : ''} as incompatible ` +
        `(${results.length} other${results.length === 1 ? '' : 's'} registered or unchanged):\n${formatIncompatible(refused)}`,
      { details: { registered: results, incompatible: refused } },
    );
  }
  return results;
}

/**
 * Compares each local schema with the latest registered version of its subject, or with every version
 * under BACKWARD_TRANSITIVE, FORWARD_TRANSITIVE and FULL_TRANSITIVE; registers nothing.
 */
export async function checkSchemas(config: SchemaAdminConfig, options: SchemaAdminOptions = {}): Promise<SchemaCheckReport> {
  const { catalogue, connection, refOf } = context(config, options);
  const results: SchemaCheckResult[] = [];
  for (const schema of catalogue.list()) {
    const result = await checkOne(connection, schema, refOf(schema));
    options.log?.debug({ subject: result.subject, status: result.status }, `${result.subject}: ${result.status}`);
    results.push(result);
  }
  return { ok: results.every((r) => r.status !== 'incompatible'), registry: connection.url, schemasDir: catalogue.dir, results };
}

async function checkOne(connection: RegistryConnection, schema: LocalSchema, ref: SchemaRef): Promise<SchemaCheckResult> {
  const latest = await connection.latest(ref.subject);
  if (!latest) return { ...ref, status: 'new', issues: [] };
  const base = { ...ref, registeredVersion: latest.version, registeredId: latest.id };
  const level = (await connection.compatibilityLevel(ref.subject)) ?? 'BACKWARD';
  if (normalise(latest.schema) === schema.text) return { ...base, level, status: 'unchanged', issues: [] };

  const registryCompatible = await connection.isCompatible(ref.subject, schema.text);
  // A *_TRANSITIVE level holds against every registered version, the others against the latest only.
  const against = level.endsWith('_TRANSITIVE') ? await connection.versions(ref.subject) : [latest];
  const issues: CompatIssue[] = [];
  for (const version of against) {
    const registered = parseRegistered(version, ref.subject, connection.url);
    const found = directionsOf(level).flatMap((d) =>
      d === 'backward' ? compatibilityIssues(schema.type, registered, d) : compatibilityIssues(registered, schema.type, d),
    );
    const suffix = against.length > 1 ? ` (against version ${version.version})` : '';
    issues.push(...found.map((i) => ({ ...i, problem: i.problem + suffix })));
  }
  if (!registryCompatible && issues.length === 0) {
    issues.push({
      path: schema.eventType,
      problem: `the registry (${level}) reports it incompatible with version ${latest.version}, but the field-level analysis found no cause`,
      fix: `compare ${schema.file} with \`GET /subjects/${ref.subject}/versions/latest\`${level.endsWith('_TRANSITIVE') ? ' and the earlier versions' : ''}`,
    });
  }
  return { ...base, level, registryCompatible, status: issues.length === 0 ? 'compatible' : 'incompatible', issues };
}

function parseRegistered(version: { version: number; schema: string }, subject: string, url: string) {
  try {
    return parseAvroType(JSON.parse(version.schema));
  } catch (error) {
    throw new OutboxError('SCHEMA_INVALID', `Version ${version.version} of subject ${subject} in ${url} is not an Avro schema this codec can parse: ${(error as Error).message}.`, {
      cause: error,
      details: { subject, version: version.version },
    });
  }
}

function directionsOf(level: string): Direction[] {
  if (level === 'NONE') return [];
  if (level.startsWith('FORWARD')) return ['forward'];
  if (level.startsWith('FULL')) return ['backward', 'forward'];
  return ['backward'];
}

function normalise(schemaText: string): string {
  try {
    return JSON.stringify(JSON.parse(schemaText));
  } catch {
    return schemaText;
  }
}

/** One block per subject: its fields, each with the fix. Shared by the error above and `schemas:check`. */
export function formatIncompatible(results: readonly SchemaCheckResult[]): string {
  return results
    .filter((r) => r.status === 'incompatible')
    .map((r) => {
      const note = r.registryCompatible ? ' (the registry would accept it, but Avro schema resolution fails)' : '';
      const lines = r.issues.map((i) => `    - ${i.path}: ${i.problem}. Fix: ${i.fix}.`);
      return `  ${r.subject} (${r.file}, ${r.level ?? 'BACKWARD'} against version ${r.registeredVersion})${note}:\n${lines.join('\n')}`;
    })
    .join('\n');
}
