/** How a variable's text becomes its setting's value (src/config/env.ts, `envValue`). */
export type EnvValueType = 'string' | 'number' | 'boolean' | 'enum' | 'list' | 'json';

/** One environment variable read by loadConfig and the setting path it feeds. */
export interface EnvSetting {
  env: string;
  path: string[];
  /** Set from the schema in ENV_SETTINGS (hand tables leave it out). */
  type?: EnvValueType;
  /** The allowed values of an enum setting. */
  values?: readonly string[];
  /** The name follows the derivation rule (`OUTBOX_` + the path in UPPER_SNAKE_CASE), not a hand table. */
  derived?: boolean;
}
