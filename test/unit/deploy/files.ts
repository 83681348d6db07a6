/**
 * Reading the deployment files for the static checks: the Dockerfile as instructions, YAML as data.
 * Static: what the files say against what the code reads (no cluster here; the image's run is test/integration/container-image.test.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { ENV_SETTINGS } from '../../../src/config';

export const ROOT = join(__dirname, '..', '..', '..');

export const read = (file: string): string => readFileSync(join(ROOT, file), 'utf8');

export interface Instruction {
  keyword: string;
  args: string;
  /** Index of the stage (FROM) it belongs to. */
  stage: number;
}

/** Dockerfile instructions, continuation lines joined, comments and parser directives dropped. */
export function dockerfileInstructions(text: string): Instruction[] {
  const logical: string[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue; // a comment inside a continued instruction
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trim()} `;
      continue;
    }
    logical.push(`${pending}${line}`.trim());
    pending = '';
  }
  let stage = -1;
  return logical.map((line) => {
    const [keyword = '', ...rest] = line.split(/\s+/);
    if (keyword.toUpperCase() === 'FROM') stage++;
    return { keyword: keyword.toUpperCase(), args: rest.join(' '), stage };
  });
}

/** Compose files use YAML merge keys (`<<: *anchor`), as Docker Compose does. */
export const parseYaml = (text: string): unknown => parse(text, { merge: true });

/** Every document of every YAML file in a folder, with the file it came from. */
export function yamlDocuments(dir: string): Array<{ file: string; doc: Record<string, unknown> }> {
  return readdirSync(join(ROOT, dir))
    .filter((f) => f.endsWith('.yaml') || f.endsWith('.yml'))
    .sort()
    .flatMap((file) =>
      parseAllDocuments(read(join(dir, file)), { merge: true }).map((d) => {
        if (d.errors.length > 0) throw new Error(`${dir}/${file}: ${d.errors.map((e) => e.message).join('; ')}`);
        return { file, doc: d.toJS() as Record<string, unknown> };
      }),
    );
}

/** The environment variables loadConfig reads, plus the logger's two. */
export const KNOWN_ENV = new Set([...ENV_SETTINGS.map((s) => s.env), 'LOG_LEVEL', 'LOG_FORMAT']);

/** The variable that feeds a setting, e.g. ['router', 'metricsHost'] → OUTBOX_ROUTER_METRICS_HOST. */
export function envFor(path: readonly string[]): string {
  const setting = ENV_SETTINGS.find((s) => s.path.join('.') === path.join('.'));
  if (!setting) throw new Error(`no environment variable feeds ${path.join('.')}`);
  return setting.env;
}

export const SERVICES = ['router', 'watchdog', 'relay'] as const;
export type ServiceName = (typeof SERVICES)[number];
