/**
 * src/config/schema.ts, the roles section: role names must be distinct and not the admin's, and the
 * published development passwords apply to the local stack's database only.
 */
import { loadConfig, type OutboxOptions } from '../../../src/config';
import { LOCAL_ROLE_PASSWORDS } from '../../../scripts/stack/settings';
import { thrown } from '../../support/expect-error';

const load = (overrides: OutboxOptions, env: NodeJS.ProcessEnv = {}) => loadConfig({ env, overrides });

describe('role names', () => {
  it('defaults to five distinct roles', () => {
    const { roles } = load({});
    expect([roles.cdc, roles.app, roles.monitor, roles.router, roles.relay]).toEqual(['outbox_cdc', 'outbox_app', 'outbox_monitor', 'outbox_router', 'outbox_relay']);
  });

  it('two roles with one name is CONFIG_INVALID naming both settings and the variable', () => {
    const error = thrown(() => load({}, { OUTBOX_ROUTER_ROLE: 'outbox_app' }));
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('roles.router (from OUTBOX_ROUTER_ROLE): "outbox_app" is also roles.app');
    expect(error.details).toEqual({ fields: ['roles.router'] });
  });

  it('a role may be the database user: the router and the relay connect as their roles', () => {
    expect(load({ database: { user: 'outbox_router' } }).database.user).toBe('outbox_router');
  });
});

describe('role passwords', () => {
  const passwords = (o: OutboxOptions) => {
    const { roles } = load(o);
    return [roles.cdcPassword, roles.appPassword, roles.monitorPassword, roles.routerPassword, roles.relayPassword];
  };

  it('are the published development passwords on the local stack', () => {
    expect(passwords({})).toEqual([LOCAL_ROLE_PASSWORDS.cdc, LOCAL_ROLE_PASSWORDS.app, LOCAL_ROLE_PASSWORDS.monitor, LOCAL_ROLE_PASSWORDS.router, LOCAL_ROLE_PASSWORDS.relay]);
    expect(passwords({ database: { host: 'localhost' } })[0]).toBe(LOCAL_ROLE_PASSWORDS.cdc);
  });

  it.each([
    ['another host', { host: 'db.example.com' }],
    ['the loopback on another port', { host: '127.0.0.1', port: 5432 }],
  ])('are unset on %s unless given', (_what, database) => {
    expect(passwords({ database })).toEqual([undefined, undefined, undefined, undefined, undefined]);
    expect(passwords({ database, roles: { appPassword: 'mine' } })).toEqual([undefined, 'mine', undefined, undefined, undefined]);
  });

  it('come from OUTBOX_ROUTER_PASSWORD and OUTBOX_RELAY_PASSWORD', () => {
    const { roles } = load({ database: { host: 'db.example.com' } }, { OUTBOX_ROUTER_PASSWORD: 'r1', OUTBOX_RELAY_PASSWORD: 'r2' });
    expect([roles.routerPassword, roles.relayPassword]).toEqual(['r1', 'r2']);
  });
});
