export { loadConfig, redactConfig, readPemFile, ENV_SETTINGS, type LoadConfigOptions } from './load';
export { outboxConfigSchema, ROLE_KINDS, type OutboxConfig, type OutboxOptions, type RoleKind } from './schema';
export { isLocalStackDatabase } from './local-stack';
