import { loadConfig, type OutboxConfig, type OutboxOptions } from '../../src/config';
import { LOCAL_ROLE_PASSWORDS, STACK_PORTS } from '../../src/config/local-stack';
import { MANAGED_ADMIN_PASSWORD, managedAdminOf, randomIdentifier, testPostgresPort } from './stack-env';

/**
 * On a version-matrix cluster (another port), the local stack's development passwords are not applied
 * by the config (they are for the stack only), so the tests give them: the Connect worker knows the CDC one.
 */
function matrixPasswords(port: number): OutboxOptions['roles'] {
  if (port === STACK_PORTS.postgres || port !== testPostgresPort()) return {};
  const { cdc, app, monitor, router, relay } = LOCAL_ROLE_PASSWORDS;
  return { cdcPassword: cdc, appPassword: app, monitorPassword: monitor, routerPassword: router, relayPassword: relay };
}

/**
 * Config for one test file: its own database, and (unless told otherwise) role names of its own so
 * least-privilege assertions are not disturbed by other files provisioning the shared roles.
 */
export function testConfig(database: string, overrides: OutboxOptions = {}): OutboxConfig {
  const suffix = randomIdentifier('r').slice(-8);
  const port = overrides.database?.port ?? testPostgresPort();
  const managed = managedAdminOf(database);
  return loadConfig({
    env: {},
    overrides: {
      ...overrides,
      database: { database, port, ...(managed ? { user: managed, password: MANAGED_ADMIN_PASSWORD } : {}), ...overrides.database },
      roles: { cdc: `cdc_${suffix}`, app: `app_${suffix}`, monitor: `mon_${suffix}`, router: `rt_${suffix}`, relay: `rl_${suffix}`, ...matrixPasswords(port), ...overrides.roles },
      connector: { slotName: randomIdentifier('slot'), name: randomIdentifier('conn'), ...overrides.connector },
    },
  });
}
