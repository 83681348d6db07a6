/**
 * src/provision/role-passwords.ts: what db:provision does about each role's password, decided before
 * anything changes. No database: which roles exist is an input.
 */
import { loadConfig, type OutboxOptions } from '../../../src/config';
import { assertNotProvisioningAsRole, planRolePasswords } from '../../../src/provision/role-passwords';
import { thrown } from '../../support/expect-error';

const remote = (roles: OutboxOptions['roles'] = {}) => loadConfig({ env: {}, overrides: { database: { host: 'db.example.com', port: 5432 }, roles } });
const ALL = new Set(['outbox_cdc', 'outbox_app', 'outbox_monitor', 'outbox_router', 'outbox_relay']);

describe('planRolePasswords', () => {
  it('on the local stack, every role gets its development password, created or not', () => {
    const steps = planRolePasswords(loadConfig({ env: {} }), new Set());
    expect(steps.map((s) => [s.role, s.exists, typeof s.password])).toEqual([...ALL].map((r) => [r, false, 'string']));
  });

  it('elsewhere, creating a role without a password is ROLE_PASSWORD_REQUIRED naming every variable to set', () => {
    const error = thrown(() => planRolePasswords(remote({ appPassword: 'a-secret' }), new Set(['outbox_monitor'])));
    expect(error.code).toBe('ROLE_PASSWORD_REQUIRED');
    for (const variable of ['OUTBOX_CDC_PASSWORD', 'OUTBOX_ROUTER_PASSWORD', 'OUTBOX_RELAY_PASSWORD']) expect(error.message).toContain(variable);
    // the app has a password, the monitor exists: neither is named
    expect(error.message).not.toContain('OUTBOX_APP_PASSWORD');
    expect(error.message).not.toContain('OUTBOX_MONITOR_PASSWORD');
    expect(error.message).toContain('db.example.com:5432');
    expect(error.message).toContain('Nothing was changed');
    expect(error.details).toMatchObject({ roles: ['outbox_cdc', 'outbox_router', 'outbox_relay'] });
    expect(error.message).not.toContain('a-secret');
  });

  it('elsewhere, an existing role without a password keeps it; a given password is set', () => {
    const steps = planRolePasswords(remote({ relayPassword: 'r-secret' }), ALL);
    expect(steps.map((s) => [s.role, s.password])).toEqual([
      ['outbox_cdc', undefined],
      ['outbox_app', undefined],
      ['outbox_monitor', undefined],
      ['outbox_router', undefined],
      ['outbox_relay', 'r-secret'],
    ]);
  });

  it('elsewhere, every role may be created when every password is given', () => {
    const given = remote({ cdcPassword: 'c', appPassword: 'a', monitorPassword: 'm', routerPassword: 'r', relayPassword: 'l' });
    expect(planRolePasswords(given, new Set()).map((s) => s.password)).toEqual(['c', 'a', 'm', 'r', 'l']);
  });
});

describe('assertNotProvisioningAsRole', () => {
  it('provisioning while connected as one of the roles is PROVISION_ROLE_CONFLICT naming both settings', () => {
    const error = thrown(() => assertNotProvisioningAsRole(loadConfig({ env: { PGUSER: 'outbox_monitor' } })));
    expect(error.code).toBe('PROVISION_ROLE_CONFLICT');
    expect(error.message).toContain('db:provision connects as outbox_monitor (database.user / PGUSER), which is also roles.monitor');
    expect(error.details).toEqual({ fields: ['roles.monitor', 'database.user'] });
  });

  it('an admin user of its own passes', () => {
    expect(() => assertNotProvisioningAsRole(loadConfig({ env: {} }))).not.toThrow();
  });
});
