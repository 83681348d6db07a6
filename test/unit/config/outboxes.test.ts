/**
 * Several outboxes in one configuration (src/config/outboxes.ts, load.ts): each entry of `outboxes`
 * resolved over the shared settings, its own variables (OUTBOX__<NAME>__…), the settings two outboxes may
 * not share, and `--outbox` selection. Files in a temporary directory, env an object passed in.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfigWithSources, selectOutboxes, type LoadConfigOptions } from '../../../src/config';
import { isOutboxError, type OutboxError } from '../../../src/errors';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'outbox-multi-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(text: string): string {
  const path = join(dir, `c${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(path, text);
  return path;
}

function failure(options: LoadConfigOptions): OutboxError {
  try {
    loadConfigWithSources(options);
  } catch (error) {
    if (isOutboxError(error)) return error;
    throw error;
  }
  throw new Error('expected an OutboxError');
}

/** Three outboxes in two databases: two schemas of one database, and a second database on another server. */
const THREE = `
database: { host: db1.internal, database: shop, user: admin, password: shared-secret }
connector: { pollIntervalMs: 50 }
outboxes:
  orders:
    connector: { name: orders-connector, slotName: orders_slot, topicPrefix: orders, topicReplacement: 'orders.event.\${routedByValue}' }
  tenant-b:
    outbox: { schema: tenant_b, publication: tenant_b_publication }
    connector: { name: tenant-b-connector, slotName: tenant_b_slot, topicPrefix: tenant-b, topicReplacement: 'tenant-b.event.\${routedByValue}' }
  billing:
    database: { host: db2.internal, database: billing }
    connector: { name: billing-connector, slotName: billing_slot, topicPrefix: billing, topicReplacement: 'billing.event.\${routedByValue}' }
`;

describe('an outboxes section', () => {
  it('resolves each entry over the shared settings, in the file order, and keeps the shared config apart', () => {
    const loaded = loadConfigWithSources({ file: file(THREE), env: {} });
    expect(loaded.outboxes.map((o) => o.name)).toEqual(['orders', 'tenant-b', 'billing']);
    const [orders, tenant, billing] = loaded.outboxes;
    expect(orders?.config.database).toMatchObject({ host: 'db1.internal', database: 'shop', user: 'admin' });
    expect(orders?.config.connector).toMatchObject({ name: 'orders-connector', slotName: 'orders_slot', pollIntervalMs: 50 });
    expect(tenant?.config.outbox).toMatchObject({ schema: 'tenant_b', table: 'outbox', publication: 'tenant_b_publication' });
    expect(billing?.config.database).toMatchObject({ host: 'db2.internal', database: 'billing', user: 'admin', password: 'shared-secret' });
    expect(billing?.config.connector.pollIntervalMs).toBe(50);
    // The shared settings stay what the file says outside the section.
    expect(loaded.config.connector.name).toBe('outbox-connector');
    expect(Object.isFrozen(billing?.config.database)).toBe(true);
    expect(billing?.sources.get('database.host')).toEqual({ kind: 'file', path: expect.stringContaining('outboxes.billing') });
  });

  it("takes an outbox's own variables over its entry, and the entry over the shared variables", () => {
    const secret = join(dir, 'billing-password');
    writeFileSync(secret, 'from-a-file\n');
    const loaded = loadConfigWithSources({
      file: file(THREE),
      env: { PGHOST: 'env-host', PGPORT: '6543', OUTBOX__BILLING__PGPORT: '7000', OUTBOX__BILLING__PGPASSWORD_FILE: secret, OUTBOX__TENANT_B__PGUSER: 'tenant_admin' },
    });
    const [orders, tenant, billing] = loaded.outboxes;
    expect(orders?.config.database).toMatchObject({ host: 'env-host', port: 6543 });
    expect(tenant?.config.database.user).toBe('tenant_admin');
    // The entry's host beats PGHOST; its own variable beats both.
    expect(billing?.config.database).toMatchObject({ host: 'db2.internal', port: 7000, password: 'from-a-file' });
    expect(billing?.sources.get('database.port')).toEqual({ kind: 'env', name: 'OUTBOX__BILLING__PGPORT' });
    expect(billing?.sources.get('database.password')).toEqual({ kind: 'env', name: 'OUTBOX__BILLING__PGPASSWORD_FILE' });
  });

  it("names the outbox, the field and the variable of a bad value, and never echoes a secret", () => {
    const error = failure({ file: file(THREE), env: { OUTBOX__BILLING__PGPORT: 'seventy' } });
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('outbox "billing" (outboxes.billing)');
    expect(error.message).toContain('database.port (from OUTBOX__BILLING__PGPORT)');
    const typo = failure({ file: file(`${THREE}    conector: { name: x }\n`), env: {} });
    expect(typo.message).toContain('outboxes.billing');
    expect(typo.message).toContain('conector');
    expect(typo.message).not.toContain('shared-secret');
  });

  it('refuses what two outboxes may not share, every clash in one error', () => {
    const clash = `
outboxes:
  a: { connector: { name: same, slotName: s_a, topicPrefix: a, topicReplacement: 'a.\${routedByValue}' } }
  b: { connector: { name: same, slotName: s_a, topicPrefix: b, topicReplacement: 'b.\${routedByValue}' } }
`;
    const error = failure({ file: file(clash), env: {} });
    expect(error.message).toContain('outboxes.b.connector.name');
    expect(error.message).toContain('outboxes.b.connector.slotName');
    // Both use the default table and publication of one database.
    expect(error.message).toContain('outboxes.b.outbox.table');
    expect(error.message).toContain('outboxes.b.outbox.publication');
    expect(error.message).not.toContain('topicPrefix');
  });

  it('allows the same slot name on two servers', () => {
    const twoServers = `
outboxes:
  a: { connector: { name: a, topicPrefix: a, topicReplacement: 'a.\${routedByValue}' } }
  b: { database: { host: other }, connector: { name: b, topicPrefix: b, topicReplacement: 'b.\${routedByValue}' } }
`;
    expect(loadConfigWithSources({ file: file(twoServers), env: {} }).outboxes).toHaveLength(2);
  });

  it.each([
    ['outboxes: [a, b]', 'must be a mapping of outbox names'],
    ['outboxes: {}', 'is empty'],
    ['outboxes: { Billing: {} }', 'outboxes."Billing"'],
    ['outboxes: { a: 3 }', 'outboxes.a in'],
    ['outboxes: { a: { outboxes: {} } }', 'do not nest'],
  ])('refuses a malformed section: %s', (text, expected) => {
    const error = failure({ file: file(text), env: {} });
    expect(error.code).toBe('CONFIG_FILE_INVALID');
    expect(error.message).toContain(expected);
  });
});

describe('selectOutboxes (--outbox)', () => {
  it('returns those named, in the configuration order; all without names', () => {
    const loaded = loadConfigWithSources({ file: file(THREE), env: {} });
    expect(selectOutboxes(loaded, ['billing', 'orders']).map((o) => o.name)).toEqual(['orders', 'billing']);
    expect(selectOutboxes(loaded, undefined)).toHaveLength(3);
  });

  it('names an unknown outbox and the ones there are', () => {
    const loaded = loadConfigWithSources({ file: file(THREE), env: {} });
    expect(() => selectOutboxes(loaded, ['invoices'])).toThrow(/--outbox invoices: no such outbox; the configuration has orders, tenant-b, billing/);
  });

  it('without a section: the shared settings are the one outbox, and --outbox is refused', () => {
    const loaded = loadConfigWithSources({ env: {} });
    expect(loaded.outboxes).toEqual([]);
    expect(selectOutboxes(loaded, undefined)).toEqual([{ name: '', config: loaded.config, sources: loaded.sources }]);
    expect(() => selectOutboxes(loaded, ['a'])).toThrow(/no outboxes section/);
  });
});
