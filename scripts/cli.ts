#!/usr/bin/env node
/**
 * The development harness's command line: the `outbox` program with the real `stack`, `demo` and `bench`
 * commands in place of the library's stand-ins. The npm scripts (stack:up, demo, bench, ...) run it, and
 * `outbox stack|demo|bench` in a repository checkout hand over to it.
 */
import type { Command } from 'commander';
import { buildProgram } from 'outbox-router/cli';
import { cliErrorText } from 'outbox-router/errors';
import { benchCommand } from './bench/command';
import { demoCommand } from './demo/command';
import { stackCommand } from './stack/command';

export function buildDevProgram(): Command {
  return buildProgram({ stack: stackCommand, demo: demoCommand, bench: benchCommand });
}

if (require.main === module) {
  buildDevProgram().parseAsync(process.argv).catch((error: unknown) => {
    process.stderr.write(cliErrorText(error));
    process.exitCode = 1;
  });
}
