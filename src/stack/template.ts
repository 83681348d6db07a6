import { readFileSync } from 'node:fs';
import { OutboxError } from '../errors';

/** Fills `${name}` placeholders; a placeholder without a value is an error, never left in place. */
export function renderTemplate(text: string, values: Readonly<Record<string, string | number>>, source = 'template'): string {
  return text.replace(/\$\{([A-Za-z][A-Za-z0-9]*)\}/g, (_match, key: string) => {
    const value = Object.hasOwn(values, key) ? values[key] : undefined;
    if (value === undefined) {
      throw new OutboxError('CONFIG_INVALID', `${source} uses \${${key}}, which has no value. Known: ${Object.keys(values).join(', ')}.`);
    }
    return String(value);
  });
}

export function renderTemplateFile(path: string, values: Readonly<Record<string, string | number>>): string {
  return renderTemplate(readFileSync(path, 'utf8'), values, path);
}

/** Parses `key=value` lines of a Java `.properties` file (no continuations: ours use none). */
export function parseProperties(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#') || line.startsWith('!')) continue;
    const eq = line.search(/[=:]/);
    if (eq < 0) continue;
    out[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  }
  return out;
}
