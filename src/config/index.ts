export { loadConfig, redactConfig, readPemFile, ENV_SETTINGS, type LoadConfigOptions } from './load';
export { outboxConfigSchema, type OutboxConfig, type OutboxOptions } from './schema';
export { isLocalStackDatabase } from './local-stack';
