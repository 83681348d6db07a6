import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { schemaCommands } from '../../src/cli/schema-commands';
import { randomName } from '../support/stack-env';
import { orderCreatedJson, tempSchemas } from '../unit/codec/temp-schemas';

/** Runs one `outbox schemas:*` command in-process; returns its exit code and what it printed. */
async function run(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  // The global option main.ts defines; `silent` keeps pino off the captured stderr.
  const program = new Command('outbox').exitOverride().option('--log-level <level>');
  for (const command of schemaCommands()) program.addCommand(command);
  const out: string[] = [];
  const err: string[] = [];
  const stdout = jest.spyOn(process.stdout, 'write').mockImplementation((chunk) => out.push(String(chunk)) > 0);
  const stderr = jest.spyOn(process.stderr, 'write').mockImplementation((chunk) => err.push(String(chunk)) > 0);
  const before = process.exitCode;
  try {
    await program.parseAsync(['node', 'outbox', ...argv, '--log-level', 'silent']);
    return { code: Number(process.exitCode ?? 0), stdout: out.join(''), stderr: err.join('') };
  } finally {
    stdout.mockRestore();
    stderr.mockRestore();
    process.exitCode = before;
  }
}

describe('outbox schemas:register / schemas:check (real registry)', () => {
  const json = orderCreatedJson();
  // The subjects come from --config's connector.topicReplacement, unique to this run.
  const topic = `${randomName('cli')}.outbox.event`;
  const subject = `${topic}.order-dev.outboxrouter.order.OrderCreated`;
  const configDir = tempSchemas({});
  const configFile = join(configDir, 'outbox.yaml');
  writeFileSync(configFile, `connector:\n  topicReplacement: "${topic}.\${routedByValue}"\n`);
  const v1 = tempSchemas({ 'order/OrderCreated': json });

  it('check says "new" and exits 0; register registers, then reports unchanged', async () => {
    const check = await run('schemas:check', '--schemas', v1, '--config', configFile);
    expect(check.code).toBe(0);
    expect(check.stdout).toContain(`new          ${subject} (not registered yet)`);

    const first = await run('schemas:register', '--schemas', v1, '--config', configFile);
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(new RegExp(`registered +${subject.replace(/\./g, '\\.')} +id \\d+ version 1`));
    const again = await run('schemas:register', '--schemas', v1, '--config', configFile, '--json');
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout).results[0]).toMatchObject({ subject, status: 'unchanged', version: 1 });
  });

  it('check exits 1 on an incompatible schema, naming the subject, the field and a fix', async () => {
    const v2 = tempSchemas({ 'order/OrderCreated': { ...json, fields: [...json.fields, { name: 'channel', type: 'string' }] } });
    const check = await run('schemas:check', '--schemas', v2, '--config', configFile);
    expect(check.code).toBe(1);
    expect(check.stdout).toContain(`INCOMPATIBLE ${subject} (BACKWARD, against version 1)`);
    expect(check.stdout).toContain('OrderCreated.channel: added without a default. Fix: give it a "default"');
    expect(check.stdout).toMatch(/\nFix: .+\n$/);

    const asJson = await run('schemas:check', '--schemas', v2, '--config', configFile, '--json');
    expect(asJson.code).toBe(1);
    expect(JSON.parse(asJson.stdout)).toMatchObject({ ok: false, results: [{ subject, status: 'incompatible', issues: [{ path: 'OrderCreated.channel' }] }] });

    const register = await run('schemas:register', '--schemas', v2, '--config', configFile);
    expect(register.code).toBe(1);
    expect(register.stderr).toContain('OrderCreated.channel: added without a default');
    expect(register.stderr).toContain('(error code SCHEMA_INCOMPATIBLE; see docs/errors.md)');
  });

  it('exits 1 with SCHEMAS_NOT_FOUND for a --schemas folder without schemas', async () => {
    const result = await run('schemas:check', '--schemas', join(configDir, 'nope'), '--config', configFile);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('No Avro schemas in');
    expect(result.stderr).toContain('SCHEMAS_NOT_FOUND');
  });
});
