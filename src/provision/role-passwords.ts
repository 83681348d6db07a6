import { ENV_SETTINGS, ROLE_KINDS, type OutboxConfig, type RoleKind } from '../config';
import { OutboxError } from '../errors';
import { STACK_HOST, STACK_PORTS } from '../config/local-stack';

/** What provisioning does about one role's password. */
export interface RolePasswordStep {
  kind: RoleKind;
  role: string;
  /** Create the role (it is missing) with this password, or give the existing role this password. */
  password?: string;
  exists: boolean;
}

/** `roles.appPassword` → `OUTBOX_APP_PASSWORD`: the one map from settings to variables (ENV_SETTINGS). */
function passwordVariable(kind: RoleKind): string {
  const setting = ENV_SETTINGS.find((s) => s.path.join('.') === `roles.${kind}Password`);
  return setting ? setting.env : `roles.${kind}Password`;
}

/**
 * db:provision resets every role to NOSUPERUSER, NOCREATEROLE and its few grants: run as one of them,
 * it would strip the very admin it runs as (or fail half-way). The router and relay do connect as their
 * roles, so this is checked here and not when the configuration is loaded.
 */
export function assertNotProvisioningAsRole(config: OutboxConfig): void {
  const kind = ROLE_KINDS.find((k) => config.roles[k] === config.database.user);
  if (!kind) return;
  throw new OutboxError(
    'PROVISION_ROLE_CONFLICT',
    `db:provision connects as ${config.database.user} (database.user / PGUSER), which is also roles.${kind}: provisioning would reset that role to a plain login ` +
      `and strip the rights it needs to provision. Connect as an admin role (PGUSER), or give roles.${kind} another name. Nothing was changed.`,
    { details: { fields: [`roles.${kind}`, 'database.user'] } },
  );
}

/**
 * Decides each role's password before anything is changed. The local stack's published passwords are
 * in the configuration only for the local stack (see rolesSchema), so elsewhere a role without a
 * configured password is:
 * - created: never. A role nobody set a password for would be a login with a password of the README,
 *   or none; refused with ROLE_PASSWORD_REQUIRED naming the variable to set.
 * - existing: kept as it is. Its password was set before (by an earlier run with the variable, or by
 *   the DBA), and a run that only changes grants or migrations must not need every secret at hand.
 */
export function planRolePasswords(config: OutboxConfig, existing: ReadonlySet<string>): RolePasswordStep[] {
  const steps = ROLE_KINDS.map((kind) => {
    const role = config.roles[kind];
    const password = config.roles[`${kind}Password`];
    return { kind, role, exists: existing.has(role), ...(password ? { password } : {}) };
  });
  const missing = steps.filter((s) => !s.exists && !s.password);
  if (missing.length > 0) {
    const { host, port } = config.database;
    const where = `${host}:${port}`;
    const names = missing.map((s) => `${s.role} (set ${passwordVariable(s.kind)}, or roles.${s.kind}Password in the config file)`);
    throw new OutboxError(
      'ROLE_PASSWORD_REQUIRED',
      `db:provision would create ${missing.length === 1 ? 'the role' : 'the roles'} ${names.join(', ')} on ${where} without a password. ` +
        `The published development passwords are used only for the local stack (${STACK_HOST}:${STACK_PORTS.postgres}); ` +
        'set a password of your own for each and run db:provision again. Nothing was changed.',
      { details: { roles: missing.map((s) => s.role), variables: missing.map((s) => passwordVariable(s.kind)), host, port } },
    );
  }
  return steps;
}
