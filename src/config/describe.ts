import { sourceAt, type ConfigSource, type LoadedConfig } from './load';
import { redactConfig } from './redact';

/** One effective setting: its dotted path, its value (redacted) and what set it. */
export interface DescribedSetting {
  path: string;
  value: unknown;
  source: string;
}

/** `env PGHOST`, `file outbox.yaml`, `flag --lanes`, `default`, `option`. */
export function sourceLabel(source: ConfigSource | undefined): string {
  switch (source?.kind) {
    case 'env':
      return `env ${source.name}`;
    case 'file':
      return `file ${source.path}`;
    case 'flag':
      return `flag ${source.name}`;
    case 'option':
      return 'option';
    default:
      return 'default';
  }
}

/**
 * Every setting of a loaded configuration, leaf by leaf (a list is one value), redacted (passwords,
 * secrets, tokens, credentials in URLs), with its source. Unset optional settings are left out.
 */
export function describeConfig({ config, sources }: Pick<LoadedConfig, 'config' | 'sources'>): DescribedSetting[] {
  const out: DescribedSetting[] = [];
  const walk = (node: unknown, path: string[]) => {
    if (node && typeof node === 'object' && !Array.isArray(node) && Object.keys(node).length > 0) {
      for (const [key, child] of Object.entries(node)) walk(child, [...path, key]);
    } else if (node !== undefined) {
      const dotted = path.join('.');
      out.push({ path: dotted, value: node, source: sourceLabel(sourceAt(sources, dotted) ?? sourceOfParent(sources, path)) });
    }
  };
  walk(redactConfig(config), []);
  return out;
}

/** A record setting (`router.policies`) is marked per entry: the setting takes the source of any of them. */
function sourceOfParent(sources: LoadedConfig['sources'], path: string[]): ConfigSource | undefined {
  const prefix = `${path.join('.')}.`;
  for (const [key, source] of sources) if (key.startsWith(prefix)) return source;
  return undefined;
}

/** The text form: `path = value  (source)`, aligned. */
export function renderConfigText(settings: readonly DescribedSetting[]): string {
  const width = Math.max(0, ...settings.map((s) => s.path.length));
  return settings.map((s) => `${s.path.padEnd(width)} = ${JSON.stringify(s.value)}  (${s.source})`).join('\n') + '\n';
}
