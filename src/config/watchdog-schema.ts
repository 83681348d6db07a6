import { z } from 'zod';
import type { EnvSetting } from './env-setting';

/** Settings of the watchdog (src/watchdog). Part of the root schema as `watchdog`. */
export const watchdogSchema = z.object({}).strict();

/** Environment variables that feed `watchdog.*` settings (merged into ENV_SETTINGS). */
export const WATCHDOG_ENV_SETTINGS: ReadonlyArray<EnvSetting> = [];
