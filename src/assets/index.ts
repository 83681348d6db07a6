import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { OutboxError } from '../errors';

/**
 * The package's root: where `connect/` (connector templates), `sql/` (migrations) and `schemas/` are,
 * whether running from `src/` (ts-jest), from `dist/`, or from an installed package.
 */
export const PACKAGE_ROOT = resolve(__dirname, '..', '..');

/** Fills `${name}` placeholders; a placeholder without a value is an error, never left in place. */
export function renderTemplate(text: string, values: Readonly<Record<string, string | number>>, source = 'template'): string {
  return text.replace(/\$\{([A-Za-z][A-Za-z0-9]*)\}/g, (_match, key: string) => {
    const value = Object.hasOwn(values, key) ? values[key] : undefined;
    if (value === undefined) {
      throw new OutboxError('TEMPLATE_VALUE_MISSING', `${source} uses \${${key}}, which has no value. Known: ${Object.keys(values).join(', ')}.`);
    }
    return String(value);
  });
}

export function renderTemplateFile(path: string, values: Readonly<Record<string, string | number>>): string {
  return renderTemplate(readFileSync(path, 'utf8'), values, path);
}
