/**
 * src/cli/dev-commands.ts: `outbox stack|demo|bench` without a static import of the harness. In a
 * repository checkout they hand their arguments to build/scripts/cli.js; in an installed package (no
 * harness) `--help` still documents them and running one fails with the fix.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildProgram } from '../../../src/cli/main';
import { devCommands, HARNESS_CLI, loadHarness } from '../../../src/cli/dev-commands';
import { thrown } from '../../support/expect-error';

describe('outbox stack|demo|bench', () => {
  let dir: string;
  let stdout: jest.SpyInstance;
  let stderr: jest.SpyInstance;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'dev-commands-'));
    stdout = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    stderr = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    process.exitCode = undefined;
  });
  afterEach(() => {
    stdout.mockRestore();
    stderr.mockRestore();
    process.exitCode = undefined;
    rmSync(dir, { recursive: true, force: true });
  });
  const written = (spy: jest.SpyInstance) => spy.mock.calls.map((c) => String(c[0])).join('');

  it('looks for the harness in the checkout, beside dist/: build/scripts/cli.js', () => {
    expect(HARNESS_CLI).toBe(join(__dirname, '..', '..', '..', 'build', 'scripts', 'cli.js'));
  });

  it('without the harness (an installed package): running one fails naming the fix, --help still answers', async () => {
    const missing = join(dir, 'nope', 'cli.js');
    expect(() => loadHarness(missing)).toThrow(/development command of the outbox-router repository.*npm run stack:up/s);
    expect(thrown(() => loadHarness(missing)).code).toBe('DEV_COMMAND_UNAVAILABLE');

    await buildProgram(devCommands(missing)).parseAsync(['stack', 'up'], { from: 'user' });
    expect(process.exitCode).toBe(1);
    expect(written(stderr)).toMatch(/outbox: this is a development command .*Clone the repository.*\n\(error code DEV_COMMAND_UNAVAILABLE; see docs\/errors\.md\)\n$/s);

    process.exitCode = undefined;
    await buildProgram(devCommands(missing)).parseAsync(['demo', '--help'], { from: 'user' });
    expect(process.exitCode).toBe(0);
    expect(written(stdout)).toMatch(/Usage: outbox demo .*needs a repository checkout/s);
  });

  it('with a harness: hands it the command, its arguments in order and the global log flags, and keeps its exit code', async () => {
    const fake = join(dir, 'cli.js');
    writeFileSync(
      fake,
      `const { Command } = require(${JSON.stringify(require.resolve('commander'))});
       exports.buildDevProgram = () => {
         const program = new Command('outbox').option('--log-level <l>').option('--log-format <f>');
         program.command('stack').allowUnknownOption().allowExcessArguments().argument('[args...]').action((args) => {
           process.stdout.write(JSON.stringify({ args, globals: program.opts() }));
           process.exitCode = 3;
         });
         return program;
       };`,
    );
    await buildProgram(devCommands(fake)).parseAsync(['--log-level', 'warn', 'stack', 'logs', 'kafka', '-n', '5', '--follow'], { from: 'user' });
    expect(JSON.parse(written(stdout))).toEqual({ args: ['logs', 'kafka', '-n', '5', '--follow'], globals: { logLevel: 'warn' } });
    expect(process.exitCode).toBe(3);
  });

  it('lists the three in `outbox --help`', () => {
    const help = buildProgram(devCommands(join(dir, 'none.js'))).helpInformation();
    for (const name of ['stack', 'demo', 'bench']) expect(help).toMatch(new RegExp(`\\n  ${name} \\[args\\.\\.\\.\\]`));
  });
});
