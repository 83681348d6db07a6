export { loadConfig, loadConfigWithSources, redactConfig, readPemFile, ENV_SETTINGS, type ConfigSource, type LoadConfigOptions, type LoadedConfig } from './load';
export { outboxConfigSchema, ROLE_KINDS, type OutboxConfig, type OutboxOptions, type RoleKind } from './schema';
export { isLocalStackDatabase } from './local-stack';
export { parse, type ParseSource } from './parse';
export type { EnvSetting, EnvValueType } from './env-setting';
export { derivedEnvName, envForm, settingLeaves, SETTING_LEAVES, type SettingLeaf } from './env';
export type { RouterConfig } from './router-schema';
export type { RelayConfig } from './relay-schema';
export type { ConsoleConfig } from './console-schema';
