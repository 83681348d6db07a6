import { ENV_SETTINGS, outboxConfigSchema, SETTING_LEAVES } from '../config';
import type { FlagSetting } from './config-option';
import { CONSOLE_FLAGS } from './console-command';
import { RELAY_FLAGS } from './relay-command';
import { ROUTER_FLAGS } from './router-command';

/** Defaults the schema cannot state (computed, or required outside the local stack). */
const COMPUTED_DEFAULTS: Record<string, string> = {
  'router.handlers': '— (required by `outbox router`)',
  'router.consumer': '`outbox-router` on the local stack; required elsewhere',
  'router.groupId': '`router.consumer`',
  'router.topics': "the routed topics of the handlers' aggregate types, named by `connector.topicReplacement` (`outbox.event.<type>`)",
  'router.poolSize': 'partitions × lanes + 2',
  'router.dlqReplicationFactor': 'min(3, brokers)',
  'router.dlqMinInsyncReplicas': "`2` on 3+ brokers, else the broker's",
  'relay.topicReplicationFactor': 'min(3, brokers)',
  'relay.topicMinInsyncReplicas': "`2` on 3+ brokers, else the broker's",
  'router.schemasDir': 'the package\'s `schemas/`',
  'acls.connectorPrincipal': '`acls.connectPrincipal`',
  'console.routerMetricsUrl': '`http://<router.metricsHost>:<router.metricsPort>/metrics`',
};

const SECTIONS = { router: ROUTER_FLAGS, relay: RELAY_FLAGS, console: CONSOLE_FLAGS, derived: [] } as const;
/** `derived`: the settings of the other sections whose variable follows the derivation rule (src/config/env.ts). */
export type DocumentedSection = keyof typeof SECTIONS;

/** Sections whose variables are documented by hand (with notes): only their derived variables are generated. */
const HAND_DOCUMENTED = ['database', 'outbox', 'roles', 'kafka', 'registry', 'connect', 'connector', 'watchdog', 'acls'];

/** Marks the generated tables in docs/configuration.md; the text between the marks is replaced whole. */
export const generatedMarks = (section: DocumentedSection) => ({
  begin: `<!-- generated: ${section} settings (src/cli/config-docs.ts; UPDATE_DOCS=1 npx jest test/unit/config/configuration-doc rewrites it) -->`,
  end: `<!-- end generated: ${section} settings -->`,
});

function shown(value: unknown): string {
  if (value === undefined) return '—';
  return `\`${typeof value === 'string' ? value : JSON.stringify(value)}\``;
}

/**
 * The table of one section, from the schema: every leaf setting of the router or the relay with its
 * environment variable, flag and default; for `derived`, every setting of the other sections whose
 * variable is derived (`OUTBOX_` + its path in UPPER_SNAKE_CASE), with its default.
 */
export function settingsTable(section: DocumentedSection): string {
  const defaults = outboxConfigSchema.parse({}) as Record<string, unknown>;
  const defaultOf = (path: string) => COMPUTED_DEFAULTS[path] ?? shown(path.split('.').reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], defaults));
  const envOf = (path: string) => ENV_SETTINGS.find((s) => s.path.join('.') === path);
  const paths = [...SETTING_LEAVES.keys()];
  if (section === 'derived') {
    const rows = paths
      .filter((path) => HAND_DOCUMENTED.includes(path.split('.')[0] as string) && envOf(path)?.derived)
      .map((path) => `| \`${path}\` | \`${envOf(path)?.env}\` | ${defaultOf(path)} |`);
    return ['| setting | variable | default |', '|---|---|---|', ...rows].join('\n');
  }
  const flags: readonly FlagSetting[] = SECTIONS[section];
  const rows = paths
    .filter((path) => path.startsWith(`${section}.`))
    .map((path) => {
      const env = envOf(path)?.env;
      const flag = flags.find((f) => f.path === path)?.flag;
      return `| \`${path}\` | ${env ? `\`${env}\`` : ''} | ${flag ? `\`${flag}\`` : ''} | ${defaultOf(path)} |`;
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
