import { randomIdentifier, testKafka, withClient } from './stack-env';

export type RoleNames = Record<'cdc' | 'app' | 'monitor' | 'router' | 'relay', string>;

/** Role names of their own for one test file, shared by every outbox it provisions. */
export function randomRoleNames(): RoleNames {
  const s = randomIdentifier('r').slice(-8);
  return { cdc: `cdc_${s}`, app: `app_${s}`, monitor: `mon_${s}`, router: `rt_${s}`, relay: `rl_${s}` };
}

/** The `roles:` line of a YAML config file naming them. */
export const rolesYaml = (roles: RoleNames): string => `roles: { cdc: ${roles.cdc}, app: ${roles.app}, monitor: ${roles.monitor}, router: ${roles.router}, relay: ${roles.relay} }`;

/** The afterAll of a file whose databases are dropped already: its roles, and every topic whose name holds `topicPart`. */
export async function dropRolesAndTopics(roles: RoleNames, topicPart: string): Promise<void> {
  await withClient('postgres', async (c) => {
    for (const role of Object.values(roles)) await c.query(`DROP ROLE IF EXISTS ${c.escapeIdentifier(role)}`).catch(() => {});
  });
  const admin = testKafka().admin();
  await admin.connect();
  const topics = (await admin.listTopics()).filter((t) => t.includes(topicPart));
  if (topics.length) await admin.deleteTopics({ topics }).catch(() => {});
  await admin.disconnect();
}
