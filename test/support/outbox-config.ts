import { loadConfig, type OutboxConfig, type OutboxOptions } from '../../src/config';
import { randomIdentifier } from './stack-env';

/**
 * Config for one test file: its own database, and (unless told otherwise) role names of its own so
 * least-privilege assertions are not disturbed by other files provisioning the shared roles.
 */
export function testConfig(database: string, overrides: OutboxOptions = {}): OutboxConfig {
  const suffix = randomIdentifier('r').slice(-8);
  return loadConfig({
    env: {},
    overrides: {
      ...overrides,
      database: { database, ...overrides.database },
      roles: { cdc: `cdc_${suffix}`, app: `app_${suffix}`, monitor: `mon_${suffix}`, router: `rt_${suffix}`, relay: `rl_${suffix}`, ...overrides.roles },
      connector: { slotName: randomIdentifier('slot'), name: randomIdentifier('conn'), ...overrides.connector },
    },
  });
}
