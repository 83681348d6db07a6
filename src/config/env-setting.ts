/** One environment variable read by loadConfig and the setting path it feeds. */
export interface EnvSetting {
  env: string;
  path: string[];
  type?: 'number' | 'list' | 'boolean';
}
