import type { z } from 'zod';
import { ENV_SETTINGS, outboxConfigSchema } from '../config';
import { relaySchema } from '../config/relay-schema';
import { routerSchema } from '../config/router-schema';
import { topicNames } from '../topics';
import type { FlagSetting } from './config-option';
import { RELAY_FLAGS } from './relay-command';
import { ROUTER_FLAGS } from './router-command';

/** Defaults the schema cannot state (computed, or required outside the local stack). */
const DERIVED_DEFAULTS: Record<string, string> = {
  'router.handlers': '— (required by `outbox router`)',
  'router.consumer': '`outbox-router` on the local stack; required elsewhere',
  'router.groupId': '`router.consumer`',
  'router.topics': `the routed topics of \`connector.topicReplacement\` (\`${topicNames().pattern.source}\`)`,
  'router.poolSize': 'partitions × lanes + 2',
  'router.schemasDir': 'the package\'s `schemas/`',
};

const SECTIONS = { router: { schema: routerSchema, flags: ROUTER_FLAGS }, relay: { schema: relaySchema, flags: RELAY_FLAGS } } as const;
export type DocumentedSection = keyof typeof SECTIONS;

/** Marks the generated tables in docs/configuration.md; the text between the marks is replaced whole. */
export const generatedMarks = (section: DocumentedSection) => ({
  begin: `<!-- generated: ${section} settings (src/cli/config-docs.ts; UPDATE_DOCS=1 npx jest test/unit/config/configuration-doc rewrites it) -->`,
  end: `<!-- end generated: ${section} settings -->`,
});

function shown(value: unknown): string {
  if (value === undefined) return '—';
  return `\`${typeof value === 'string' ? value : JSON.stringify(value)}\``;
}

/** The table of one section: every setting with its environment variable, flag and default, from the schema. */
export function settingsTable(section: DocumentedSection): string {
  const { schema, flags } = SECTIONS[section];
  const defaults = (outboxConfigSchema.parse({}) as Record<string, Record<string, unknown>>)[section] ?? {};
  const keys = Object.keys((schema as z.ZodObject).shape);
  const rows = keys.map((key) => {
    const path = `${section}.${key}`;
    const env = ENV_SETTINGS.find((s) => s.path.join('.') === path)?.env;
    const flag = flags.find((f: FlagSetting) => f.path === path)?.flag;
    return `| \`${path}\` | ${env ? `\`${env}\`` : ''} | ${flag ? `\`${flag}\`` : ''} | ${DERIVED_DEFAULTS[path] ?? shown(defaults[key])} |`;
  });
  return ['| setting | variable | flag | default |', '|---|---|---|---|', ...rows].join('\n');
}

/** `text` with each section's generated table replaced by a fresh one. */
export function withGeneratedTables(text: string): string {
  let out = text;
  for (const section of Object.keys(SECTIONS) as DocumentedSection[]) {
    const { begin, end } = generatedMarks(section);
    const from = out.indexOf(begin);
    const to = out.indexOf(end);
    if (from < 0 || to < from) throw new Error(`docs/configuration.md lacks the marks of the ${section} table:\n${begin}\n${end}`);
    out = `${out.slice(0, from + begin.length)}\n${settingsTable(section)}\n${out.slice(to)}`;
  }
  return out;
}
