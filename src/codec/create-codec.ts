import type { Type } from 'avsc';
import { OutboxError } from '../errors';
import { AVRO_CONTENT_TYPE, CONTENT_TYPES, JSON_CONTENT_TYPE, normalizeContentType, type ContentType } from './content-type';
import { decodeJsonPayload, encodeJsonPayload } from './json-payload';
import { validateAvroPayload } from './payload-validation';
import { createRegistryConnection, type RegistryConnection, type RegistryConnectionOptions, type RegistrySettings } from './registry-connection';
import { parseAvroType } from './logical-types';
import { createSchemaCatalogue, type LocalSchema, type SchemaCatalogue } from './schema-catalogue';
import { defaultTopicFor, topicRecordSubject, type TopicFor } from './subject-naming';
import { frameConfluent, unframeConfluent } from './wire-format';

export interface CodecOptions extends RegistryConnectionOptions {
  /** `config.registry`. */
  registry: RegistrySettings;
  /** Default: the project's `schemas/`. */
  schemasDir?: string;
  /**
   * Register a local schema on first use instead of failing with SCHEMA_NOT_REGISTERED. Off by default:
   * in production, registration is a deliberate step (`outbox schemas:register`) checked in CI.
   */
  autoRegister?: boolean;
  /** Topic of an aggregate type; part of the subject name. Default `outbox.event.<aggregateType>`. */
  topicFor?: TopicFor;
  /** Replaces the HTTP connection (tests, or sharing one between codecs). */
  connection?: RegistryConnection;
  /**
   * The consumer's reader schemas, aggregate type → event type → Avro schema (parsed JSON or its text),
   * e.g. the `schemas` export of a handlers module. They take precedence over `schemasDir` when decoding
   * with the `reader` option; an event type in neither is decoded with the writer's schema.
   */
  readerSchemas?: ReaderSchemas;
}

/** aggregate type → event type → an Avro record schema (parsed JSON or its text). */
export type ReaderSchemas = Readonly<Record<string, Readonly<Record<string, unknown>>>>;

export interface DecodeOptions {
  /**
   * Read with the consumer's schema of this event type (from `readerSchemas`, else `schemasDir` when it is
   * given: the package's own example schemas are never a consumer's reader schemas) instead
   * of the writer's (Avro schema resolution): an older record gains the defaults of fields added since,
   * and fields the reader dropped disappear. An event type without a reader schema is read with the
   * writer's schema. A reader that cannot read the writer's schema fails with SCHEMA_INCOMPATIBLE.
   */
  reader?: { aggregateType: string; eventType: string };
}

export interface DecodedPayload {
  payload: unknown;
  contentType: ContentType;
  /** Avro only: the registry id from the record's header, and the writer schema's full name. */
  schemaId?: number;
  schemaName?: string;
}

/** Does the registry still resolve a schema id it resolved before? (Codec.checkRegistry) */
export type RegistryCheck = { resolves: true; schemaId: number } | { resolves: false; reason: string };

export interface Codec {
  readonly schemas: SchemaCatalogue;
  readonly registryUrl: string;
  /** `<topic>-<record full name>` (TopicRecordNameStrategy; see subject-naming.ts). */
  subjectFor(aggregateType: string, eventType: string): string;
  encode(aggregateType: string, eventType: string, payload: unknown, contentType: ContentType): Promise<Buffer>;
  decode(bytes: Buffer, contentType: ContentType | string, options?: DecodeOptions): Promise<unknown>;
  decodeWithInfo(bytes: Buffer, contentType: ContentType | string, options?: DecodeOptions): Promise<DecodedPayload>;
  /**
   * Asks the registry now (past every cache) for the schema id this codec last decoded with. It tells
   * one stray unknown id (the registry answers, it just lacks that id) from a registry that resolves
   * nothing (an outage, the wrong registry, one that lost its data): only the first may be given up on.
   * Never throws; without any id decoded yet there is no proof, so `resolves` is false.
   */
  checkRegistry(): Promise<RegistryCheck>;
}

/** Encodes outbox payloads for the writer and decodes them for the router, Avro or JSON. */
export function createCodec(options: CodecOptions): Codec {
  const schemas = createSchemaCatalogue({ schemasDir: options.schemasDir });
  const connection = options.connection ?? createRegistryConnection(options.registry, options);
  const topicFor = options.topicFor ?? defaultTopicFor;
  const ids = new Map<string, Promise<number>>();
  const resolvers = new Map<string, ReturnType<Type['createResolver']>>();
  /** The last schema id a record was decoded with: what checkRegistry asks for again. */
  let resolvedId: number | undefined;

  const given = readerSchemaMap(options.readerSchemas);
  const readerSchema = (r: { aggregateType: string; eventType: string }): LocalSchema | undefined =>
    given.get(`${r.aggregateType}/${r.eventType}`) ?? (options.schemasDir === undefined ? undefined : schemas.find(r.aggregateType, r.eventType));

  const subjectOf = (schema: LocalSchema) => topicRecordSubject(topicFor(schema.aggregateType), schema.fullName);

  async function lookupId(schema: LocalSchema, subject: string): Promise<number> {
    if (options.autoRegister) return connection.register(subject, schema.text);
    const found = await connection.lookup(subject, schema.text);
    if (found) return found.id;
    throw new OutboxError(
      'SCHEMA_NOT_REGISTERED',
      `The schema ${schema.file} (${schema.fullName}) is not registered under subject ${subject} in ${connection.url}. ` +
        'Run `outbox schemas:register` (after `outbox schemas:check` if the subject has older versions), or create the codec with autoRegister: true.',
      { details: { subject, file: schema.file, registry: connection.url } },
    );
  }

  /** One lookup per subject per process; a failure is forgotten so the next call asks again. */
  function schemaId(schema: LocalSchema): Promise<number> {
    const subject = subjectOf(schema);
    let id = ids.get(subject);
    if (!id) {
      id = lookupId(schema, subject);
      ids.set(subject, id);
      id.catch(() => ids.delete(subject));
    }
    return id;
  }

  /** One resolver per (writer schema id, reader schema): building one walks both schemas. */
  function readerFor(schemaId: number, writer: Type, reader: LocalSchema) {
    const key = `${schemaId}|${reader.file}`;
    let resolver = resolvers.get(key);
    if (!resolver) {
      try {
        resolver = reader.type.createResolver(writer);
      } catch (error) {
        // Not retriable: every record written with this schema fails the same way until the reader changes.
        throw new OutboxError(
          'SCHEMA_INCOMPATIBLE',
          `A record written with schema id ${schemaId} (${writer.name}) cannot be read with the reader schema ${reader.file} (${reader.fullName}): ` +
            `${(error as Error).message}. Make the reader schema compatible with every version producers still write (give added fields a "default", ` +
            'keep the record name or add the old one to "aliases"; `outbox schemas:check` names the fields), then replay the dead letters with `outbox dlq:replay`.',
          { cause: error, details: { schemaId, writer: writer.name, reader: reader.file } },
        );
      }
      resolvers.set(key, resolver);
    }
    return resolver;
  }

  async function decodeWithInfo(bytes: Buffer, contentType: ContentType | string, decodeOptions: DecodeOptions = {}): Promise<DecodedPayload> {
    const type = normalizeContentType(contentType);
    if (type === JSON_CONTENT_TYPE) return { payload: decodeJsonPayload(bytes), contentType: type };
    if (type !== AVRO_CONTENT_TYPE) {
      throw new OutboxError('DECODE_FAILED', `Cannot decode a payload of content type ${JSON.stringify(contentType)}: the codec reads ${CONTENT_TYPES.join(' and ')}.`, {
        details: { contentType },
      });
    }
    const { schemaId, body } = unframeConfluent(bytes);
    const writer = await connection.writerType(schemaId);
    if (!writer) {
      // Retriable: a registry replica that has not caught up, or a schema registered just after the
      // record was written, answers 404 for a while. The router waits instead of dead-lettering.
      throw new OutboxError(
        'SCHEMA_ID_UNKNOWN',
        `Cannot decode the Avro payload yet: schema id ${schemaId} is not in the registry at ${connection.url}. ` +
          'Either the registry has not caught up (a replica, a schema registered just now), or the record was written against another ' +
          'registry, or the registry lost its data (Apicurio stores in memory by default: run `outbox schemas:register` again). The call is retried.',
        { retriable: true, details: { schemaId, registry: connection.url } },
      );
    }
    resolvedId = schemaId;
    const reader = decodeOptions.reader ? readerSchema(decodeOptions.reader) : undefined;
    let payload: unknown;
    try {
      payload = reader ? reader.type.fromBuffer(body, readerFor(schemaId, writer, reader)) : writer.fromBuffer(body);
    } catch (error) {
      if (error instanceof OutboxError) throw error;
      throw new OutboxError(
        'DECODE_FAILED',
        `Cannot decode the Avro payload: its ${body.length}-byte body does not match schema id ${schemaId} (${writer.name}): ${(error as Error).message}.`,
        { cause: error, details: { schemaId } },
      );
    }
    return { payload, contentType: type, schemaId, schemaName: writer.name };
  }

  return {
    schemas,
    registryUrl: connection.url,
    subjectFor: (aggregateType, eventType) => subjectOf(schemas.get(aggregateType, eventType)),

    async encode(aggregateType, eventType, payload, contentType) {
      const type = normalizeContentType(contentType);
      if (type === JSON_CONTENT_TYPE) return encodeJsonPayload(payload, `${aggregateType}/${eventType}`);
      if (type !== AVRO_CONTENT_TYPE) {
        throw new OutboxError('PAYLOAD_INVALID', `Unknown content type ${JSON.stringify(contentType)} for ${aggregateType}/${eventType}: use ${CONTENT_TYPES.join(' or ')}.`, {
          details: { contentType },
        });
      }
      const schema = schemas.get(aggregateType, eventType);
      validateAvroPayload(schema, payload);
      // Validated first: a bad payload fails without touching the registry.
      return frameConfluent(await schemaId(schema), schema.type.toBuffer(payload));
    },

    decode: async (bytes, contentType, decodeOptions) => (await decodeWithInfo(bytes, contentType, decodeOptions)).payload,
    decodeWithInfo,

    async checkRegistry() {
      const id = resolvedId;
      if (id === undefined) return { resolves: false, reason: `no schema id has been read from ${connection.url} yet` };
      try {
        if (await connection.writerType(id, { fresh: true })) return { resolves: true, schemaId: id };
        return { resolves: false, reason: `schema id ${id}, read from ${connection.url} before, is not found there now` };
      } catch (error) {
        return { resolves: false, reason: `asking ${connection.url} again for schema id ${id}, read before, failed: ${(error as Error).message}` };
      }
    },
  };
}

/** `readerSchemas` as catalogue entries; a schema that does not parse fails at codec creation, naming its place. */
function readerSchemaMap(readerSchemas: ReaderSchemas | undefined): Map<string, LocalSchema> {
  const map = new Map<string, LocalSchema>();
  for (const [aggregateType, byEvent] of Object.entries(readerSchemas ?? {})) {
    for (const [eventType, schema] of Object.entries(byEvent ?? {})) {
      const file = `readerSchemas.${aggregateType}.${eventType}`;
      let type: Type;
      try {
        type = parseAvroType(typeof schema === 'string' ? JSON.parse(schema) : schema);
      } catch (error) {
        throw new OutboxError('SCHEMA_INVALID', `The reader schema ${file} is not a valid Avro schema: ${(error as Error).message}. Fix it in the module or options that declare it.`, {
          cause: error,
          details: { file },
        });
      }
      if (type.typeName !== 'record') {
        throw new OutboxError('SCHEMA_INVALID', `The reader schema ${file} is a ${type.typeName}; an event schema must be a record. Fix it in the module or options that declare it.`, { details: { file } });
      }
      const fullName = type.name as string;
      map.set(`${aggregateType}/${eventType}`, { aggregateType, eventType, file, fullName, text: JSON.stringify(type.schema()), type });
    }
  }
  return map;
}
