/** `outbox schemas:types` (src/cli/schema-commands.ts): writes the types file; --check is the CI gate. */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventTypesFile, schemaCommands } from '../../../src/cli/schema-commands';
import { PROJECT_ROOT } from '../../../scripts/stack/paths';
import { tempSchemas } from '../codec/temp-schemas';

const created = { type: 'record', name: 'OrderCreated', fields: [{ name: 'orderId', type: 'string' }] };

async function run(...args: string[]): Promise<{ code: number | undefined; out: string; err: string }> {
  const command = schemaCommands().find((c) => c.name() === 'schemas:types');
  if (!command) throw new Error('no schemas:types command');
  const out: string[] = [];
  const err: string[] = [];
  const stdout = jest.spyOn(process.stdout, 'write').mockImplementation((chunk) => (out.push(String(chunk)), true));
  const stderr = jest.spyOn(process.stderr, 'write').mockImplementation((chunk) => (err.push(String(chunk)), true));
  const before = process.exitCode;
  try {
    await command.exitOverride().parseAsync(args, { from: 'user' });
    return { code: process.exitCode as number | undefined, out: out.join(''), err: err.join('') };
  } finally {
    stdout.mockRestore();
    stderr.mockRestore();
    process.exitCode = before;
  }
}

describe('outbox schemas:types', () => {
  it('writes the file, then --check passes; a changed schema makes --check fail naming the fix, and writes nothing', async () => {
    const schemas = tempSchemas({ 'order/OrderCreated': created });
    const out = join(mkdtempSync(join(tmpdir(), 'outbox-types-out-')), 'outbox-events.ts');

    const missing = await run('--schemas', schemas, '--out', out, '--check');
    expect(missing.code).toBe(1);
    expect(missing.out).toContain('does not exist');
    expect(existsSync(out)).toBe(false);

    const wrote = await run('--schemas', schemas, '--out', out);
    expect(wrote.code).toBe(0);
    expect(wrote.out).toContain('wrote');
    expect(readFileSync(out, 'utf8')).toContain('export type EventMap = {\n  order: {\n    OrderCreated: OrderCreated;');
    expect((await run('--schemas', schemas, '--out', out, '--check')).code).toBe(0);
    expect((await run('--schemas', schemas, '--out', out)).out).toContain('unchanged');

    writeFileSync(join(schemas, 'order', 'OrderCreated.avsc'), JSON.stringify({ ...created, fields: [...created.fields, { name: 'note', type: ['null', 'string'], default: null }] }));
    const before = readFileSync(out, 'utf8');
    const stale = await run('--schemas', schemas, '--out', out, '--check');
    expect(stale.code).toBe(1);
    expect(stale.out).toContain('is out of date');
    expect(stale.out).toContain(`outbox schemas:types --schemas ${schemas} --out ${out}`);
    expect(readFileSync(out, 'utf8')).toBe(before);
    expect((await run('--schemas', schemas, '--out', out)).code).toBe(0);
    expect(readFileSync(out, 'utf8')).toContain('note: string | null;');
  });

  it('refuses a folder without schemas (SCHEMAS_NOT_FOUND) instead of writing an empty map', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'outbox-no-schemas-'));
    const out = join(empty, 'outbox-events.ts');
    const result = await run('--schemas', empty, '--out', out);
    expect(result.code).toBe(1);
    expect(result.err).toContain('SCHEMAS_NOT_FOUND');
    expect(existsSync(out)).toBe(false);
  });

  it('examples/outbox-events.ts is what the repository\'s schemas generate (regenerate: outbox schemas:types --schemas schemas --out examples/outbox-events.ts)', () => {
    const file = join(PROJECT_ROOT, 'examples', 'outbox-events.ts');
    expect(readFileSync(file, 'utf8')).toBe(eventTypesFile(join(PROJECT_ROOT, 'schemas'), file));
  });
});
