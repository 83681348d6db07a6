/** The pure part of the PostgreSQL pair (scripts/stack/postgres-ha-config.ts): roles, conninfo, the proxy's target. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { OutboxError } from '../../../src/errors';
import { PROJECT_ROOT } from '../../../scripts/stack/paths';
import {
  alterSystemStatements, formatProxyTarget, HA_PORTS, PAIR_CONF, parseProxyTarget, passfileLine, peerOf, primaryConninfo, quoteConninfo,
  renderAutoConf, roleSettings, standbyName, validatePorts,
} from '../../../scripts/stack/postgres-ha-config';
import { STACK_PORTS } from '../../../scripts/stack/settings';

const settingKeys = (text: string): string[] => text.split('\n').map((l) => /^\s*([a-z_]+)\s*=/.exec(l)?.[1]).filter((k): k is string => k !== undefined);

describe('postgres-ha settings', () => {
  it('a primary with its standby waits for it in commits and logical decoding; without one it waits for nothing', () => {
    const options = { peerPort: 55436, passfile: '/x/.pgpass' };
    expect(roleSettings('primary', 'a', { ...options, withStandby: true })).toEqual({
      synchronous_standby_names: 'node_b',
      synchronized_standby_slots: 'node_b',
      primary_conninfo: '',
      primary_slot_name: '',
    });
    expect(roleSettings('primary', 'b', { ...options, withStandby: false })).toMatchObject({ synchronous_standby_names: '', synchronized_standby_slots: '' });
  });

  it('a standby streams through its own slot, with a dbname (slot sync needs it) and its name as application_name', () => {
    const settings = roleSettings('standby', 'b', { peerPort: 55435, passfile: '/x/.pgpass', withStandby: true });
    expect(settings).toEqual({
      synchronous_standby_names: '',
      synchronized_standby_slots: '',
      primary_conninfo: 'host=127.0.0.1 port=55435 user=postgres passfile=/x/.pgpass dbname=app application_name=node_b',
      primary_slot_name: 'node_b',
    });
    // the password stays in the passfile, never in a configuration file
    expect(settings.primary_conninfo).not.toMatch(/password/);
  });

  it('quotes a conninfo value with spaces or quotes', () => {
    expect(quoteConninfo('/plain/path')).toBe('/plain/path');
    expect(quoteConninfo("/a b/it's")).toBe("'/a b/it\\'s'");
    expect(primaryConninfo('a', 1, '/a b/p')).toContain("passfile='/a b/p'");
  });

  it('renders postgresql.auto.conf and ALTER SYSTEM statements with the quoting each needs', () => {
    const settings = { primary_conninfo: "passfile='/a b' x\\y", synchronous_standby_names: '' };
    expect(renderAutoConf(settings)).toContain("primary_conninfo = 'passfile=''/a b'' x\\\\y'\nsynchronous_standby_names = ''\n");
    expect(alterSystemStatements(settings)).toEqual([
      "ALTER SYSTEM SET primary_conninfo = 'passfile=''/a b'' x\\y'",
      "ALTER SYSTEM SET synchronous_standby_names = ''",
      'SELECT pg_reload_conf()',
    ]);
  });

  it("adds the pair's settings without repeating one of the stack's (a later line would silently win)", () => {
    const stack = settingKeys(readFileSync(join(PROJECT_ROOT, 'connect', 'postgresql.conf'), 'utf8'));
    const pair = settingKeys(PAIR_CONF);
    expect(pair).toEqual(expect.arrayContaining(['hot_standby', 'hot_standby_feedback', 'sync_replication_slots', 'wal_log_hints']));
    expect(pair.filter((k) => stack.includes(k))).toEqual([]);
    expect(stack).toEqual(expect.arrayContaining(['wal_level', 'synchronous_commit']));
  });

  it('escapes the passfile fields', () => {
    expect(passfileLine()).toBe('127.0.0.1:*:*:postgres:postgres\n');
  });
});

describe('postgres-ha nodes and ports', () => {
  it('names each standby after its node, and pairs a with b', () => {
    expect([standbyName('a'), standbyName('b'), peerOf('a'), peerOf('b')]).toEqual(['node_a', 'node_b', 'b', 'a']);
  });

  it("puts the proxy on the stack's PostgreSQL address and the nodes on ports no other service uses", () => {
    expect(HA_PORTS.proxy).toBe(STACK_PORTS.postgres);
    const others = Object.values(STACK_PORTS);
    expect(others).not.toContain(HA_PORTS.a);
    expect(others).not.toContain(HA_PORTS.b);
  });

  it('refuses ports that collide or are out of range', () => {
    expect(() => validatePorts({ a: 1, b: 1, proxy: 2 })).toThrow(OutboxError);
    expect(() => validatePorts({ a: 1, b: 2, proxy: 70_000 })).toThrow(/three different ports.*1, 2, 70000/);
    expect(validatePorts({ a: 5, b: 6, proxy: 7 })).toEqual({ a: 5, b: 6, proxy: 7 });
  });
});

describe('pg-proxy target file', () => {
  it('reads one host:port line, as written', () => {
    expect(parseProxyTarget(formatProxyTarget({ host: '127.0.0.1', port: 55436 }))).toEqual({ host: '127.0.0.1', port: 55436 });
    expect(parseProxyTarget('  localhost:5432 \n')).toEqual({ host: 'localhost', port: 5432 });
  });

  it.each(['', '127.0.0.1', '127.0.0.1:', '127.0.0.1:0', '127.0.0.1:65536', 'a b:1', '127.0.0.1:5432\n127.0.0.1:5433'])('refuses %j with CONFIG_INVALID naming the value', (text) => {
    let error: unknown;
    try {
      parseProxyTarget(text, '/state/proxy-target');
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(OutboxError);
    expect((error as OutboxError).code).toBe('CONFIG_INVALID');
    expect((error as OutboxError).message).toContain(`/state/proxy-target must hold one line host:port`);
    expect((error as OutboxError).message).toContain(JSON.stringify(text.trim()));
  });
});
