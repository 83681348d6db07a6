import { z } from 'zod';
import type { EnvSetting } from './env-setting';

/** Settings of the relay (src/relay). Part of the root schema as `relay`. */
export const relaySchema = z.object({}).strict();

/** Environment variables that feed `relay.*` settings (merged into ENV_SETTINGS). */
export const RELAY_ENV_SETTINGS: ReadonlyArray<EnvSetting> = [];
