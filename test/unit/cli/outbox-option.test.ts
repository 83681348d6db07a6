/**
 * `--outbox` on a command that acts on one outbox (connector:render: no network), with a config file
 * describing several: refused without it (naming the outboxes), that outbox's settings with it, and a
 * comma list refused. Runs the built CLI (dist/cli/main.js).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const MAIN = join(__dirname, '../../../dist/cli/main.js');
let dir: string;
let file: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'outbox-option-'));
  file = join(dir, 'outbox.yaml');
  writeFileSync(
    file,
    [
      'outboxes:',
      "  orders: { connector: { name: orders-connector, slotName: orders_slot, topicPrefix: orders, topicReplacement: 'orders.${routedByValue}' } }",
      "  billing: { database: { database: billing }, connector: { name: billing-connector, slotName: billing_slot, topicPrefix: billing, topicReplacement: 'billing.${routedByValue}' } }",
      '',
    ].join('\n'),
  );
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const run = (...args: string[]) => spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', env: { ...process.env, LOG_LEVEL: 'silent' } });

describe('--outbox with an outboxes section', () => {
  it('is required by a command on one outbox, which names the outboxes there are', () => {
    const r = run('connector:render', '--config', file);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('describes 2 outboxes (orders, billing): name the one for connector:render with --outbox <name>');
  });

  it("selects that outbox's settings", () => {
    const r = run('--outbox', 'billing', 'connector:render', '--config', file);
    expect(r.status).toBe(0);
    const rendered = JSON.parse(r.stdout) as { name: string; config: Record<string, string> };
    expect(rendered.name).toBe('billing-connector');
    expect(rendered.config['database.dbname']).toBe('billing');
    expect(rendered.config['slot.name']).toBe('billing_slot');
  });

  it('refuses a list on a command that acts on one outbox, and an unknown name', () => {
    expect(run('--outbox', 'orders,billing', 'connector:render', '--config', file).stderr).toContain('connector:render acts on one outbox; --outbox orders,billing names 2');
    expect(run('--outbox', 'invoices', 'connector:render', '--config', file).stderr).toContain('--outbox invoices: no such outbox; the configuration has orders, billing');
  });
});
