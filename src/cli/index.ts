/**
 * The `outbox` command line as a library: the program itself (to embed or extend) and the helpers its
 * commands share, so a command added beside them reports errors and logs the same way.
 */
export { buildProgram } from './main';
export { action, formatMs, loggerFor, type GlobalOptions } from './run-command';
export { configFrom, withConfigOption } from './config-option';
export { devCommand, devCommands, loadHarness, HARNESS_CLI, type DevCommandName } from './dev-commands';
