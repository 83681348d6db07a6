export { createCodec, type Codec, type CodecOptions, type DecodeOptions, type DecodedPayload, type ReaderSchemas, type RegistryCheck } from './create-codec';
export { AVRO_CONTENT_TYPE, JSON_CONTENT_TYPE, CONTENT_TYPES, normalizeContentType, type ContentType } from './content-type';
export { createSchemaCatalogue, defaultSchemasDir, type LocalSchema, type SchemaCatalogue, type SchemaCatalogueOptions } from './schema-catalogue';
export { generateEventTypes, type EventMapShape, type GenerateTypesOptions } from './generate-types';
export { defaultTopicFor, topicForReplacement, topicRecordSubject, type TopicFor } from './subject-naming';
export { frameConfluent, unframeConfluent, MAGIC_BYTE } from './wire-format';
export { createRegistryConnection, type RegistryConnection, type RegistryConnectionOptions, type RegistrySettings } from './registry-connection';
export { compatibilityIssues, type CompatIssue, type Direction } from './compatibility';
export {
  registerSchemas,
  checkSchemas,
  formatIncompatible,
  type RegisterResult,
  type SchemaAdminConfig,
  type SchemaAdminOptions,
  type SchemaCheckReport,
  type SchemaCheckResult,
} from './schema-admin';
