import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { PACKAGE_ROOT } from '../assets';
import { OutboxError } from '../errors';
import type { GlobalOptions } from './run-command';
import { action } from './run-command';

/**
 * `outbox stack|demo|bench` are development commands: the harness that implements them lives in the
 * repository's `scripts/` folder, compiled to `build/scripts/` by `npm run build`, and is not part of the
 * published package. The library never imports it; these commands look for it at run time and hand their
 * arguments to it, so they work in a repository checkout and fail with the fix in an installed package.
 */
export const HARNESS_CLI = join(PACKAGE_ROOT, 'build', 'scripts', 'cli.js');

export type DevCommandName = 'stack' | 'demo' | 'bench';

const SUMMARIES: Readonly<Record<DevCommandName, string>> = {
  stack: 'Run the local stack as plain processes (no Docker): PostgreSQL on 55432, Kafka on 9092, Kafka Connect + Debezium on 8083, Apicurio Registry on 8081. Subcommands: up, down, status, logs.',
  demo: 'The whole pipeline on the local stack in one command: stack, provisioning, schemas, connector, router and watchdog, with orders written through the example CreateOrder; checks every committed event was handled exactly once.',
  bench: 'Measure the pipeline on the local stack (started if needed) and print every figure beside its target (see docs/bench.md).',
};

interface HarnessModule {
  buildDevProgram(): Command;
}

/** The compiled harness, or an error naming the fix when this is an installed package (no `scripts/`). */
export function loadHarness(file: string = HARNESS_CLI): HarnessModule {
  if (!existsSync(file)) {
    throw new OutboxError(
      'DEV_COMMAND_UNAVAILABLE',
      `this is a development command of the outbox-router repository, and ${file} (its compiled harness) does not exist. ` +
        'Clone the repository and run `npm ci && npm run build`, then `npm run stack:up` (or `outbox stack up`, `npm run demo`, `npm run bench`) there. ' +
        'An installed package ships only the library and the production commands.',
    );
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(file) as HarnessModule;
}

/** The global flags given before the command, passed on so the harness logs the same way. */
function globalArgs(command: Command): string[] {
  const opts = command.optsWithGlobals<GlobalOptions>();
  return [...(opts.logLevel ? ['--log-level', opts.logLevel] : []), ...(opts.logFormat ? ['--log-format', opts.logFormat] : [])];
}

/**
 * A stand-in for one development command: every argument after its name (`--help` included) goes to the
 * harness's own definition of it, which parses, documents and runs it.
 */
export function devCommand(name: DevCommandName, harnessFile: string = HARNESS_CLI): Command {
  const command = new Command(name)
    .description(`${SUMMARIES[name]} Development command: needs a repository checkout (built by npm run build).`)
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .argument('[args...]', 'arguments of the command (see `outbox ' + name + ' --help` in the repository)');
  command.action(
    action(async (args: string[]) => {
      if (!existsSync(harnessFile) && args.some((a) => a === '--help' || a === '-h')) {
        process.stdout.write(command.helpInformation());
        return 0;
      }
      // The harness's commands set process.exitCode themselves (and exit after --help or a usage error).
      await loadHarness(harnessFile).buildDevProgram().parseAsync([...globalArgs(command), name, ...args], { from: 'user' });
      return typeof process.exitCode === 'number' ? process.exitCode : 0;
    }),
  );
  return command;
}

export function devCommands(harnessFile: string = HARNESS_CLI): Record<DevCommandName, () => Command> {
  return { stack: () => devCommand('stack', harnessFile), demo: () => devCommand('demo', harnessFile), bench: () => devCommand('bench', harnessFile) };
}
