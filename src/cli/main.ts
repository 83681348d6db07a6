#!/usr/bin/env node
import { Command, Option } from 'commander';
import { cliErrorText } from '../errors';
import { configCommand } from './config-command';
import { consoleCommand } from './console-command';
import { connectorCommands } from './connector-commands';
import { dbCommands } from './db-commands';
import { devCommands, type DevCommandName } from './dev-commands';
import { dlqCommands } from './dlq-commands';
import { inboxPartitionCommand, inboxPruneCommand } from './inbox-command';
import { kafkaAclsCommand } from './acls-command';
import { topicsGrowCommand } from './grow-command';
import { outboxCommands } from './outbox-commands';
import { relayCommand } from './relay-command';
import { routerCommand } from './router-command';
import { schemaCommands } from './schema-commands';
import { statusCommand } from './status-command';
import { watchdogCommand } from './watchdog-command';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { version } = require('../../package.json') as { version: string };

/**
 * The `outbox` program. `stack`, `demo` and `bench` are development commands: by default stand-ins that
 * hand over to the repository's compiled harness (scripts/cli.ts passes its real definitions instead).
 */
export function buildProgram(dev: Record<DevCommandName, () => Command> = devCommands()): Command {
  const program = new Command('outbox')
    .description('outbox-router: the transactional outbox on PostgreSQL, Debezium and Kafka, deployed, watched and debugged with one tool.')
    .version(version)
    .addOption(new Option('--log-level <level>', 'log level (default: $LOG_LEVEL or info)').choices(['trace', 'debug', 'info', 'warn', 'error', 'silent']))
    // no default here: LOG_LEVEL applies when the flag is absent
    .addOption(new Option('--log-format <format>', 'json for machines, pretty for people (default: pretty on a terminal)').choices(['json', 'pretty']))
    .option('--outbox <names>', 'with an outboxes section in --config: the outbox (or a comma list, for the commands that handle several) to act on; default: all of them (docs/multi-outbox.md)')
    .showHelpAfterError('(run with --help for usage)');
  program.addCommand(dev.stack());
  for (const command of dbCommands()) program.addCommand(command);
  for (const command of schemaCommands()) program.addCommand(command);
  for (const command of connectorCommands()) program.addCommand(command);
  program.addCommand(routerCommand());
  for (const command of dlqCommands()) program.addCommand(command);
  program.addCommand(inboxPruneCommand());
  program.addCommand(inboxPartitionCommand());
  for (const command of outboxCommands()) program.addCommand(command);
  program.addCommand(watchdogCommand());
  program.addCommand(relayCommand());
  program.addCommand(statusCommand());
  program.addCommand(kafkaAclsCommand());
  program.addCommand(topicsGrowCommand());
  program.addCommand(consoleCommand());
  program.addCommand(configCommand());
  program.addCommand(dev.demo());
  program.addCommand(dev.bench());
  return program;
}

if (require.main === module) {
  buildProgram().parseAsync(process.argv).catch((error: unknown) => {
    process.stderr.write(cliErrorText(error));
    process.exitCode = 1;
  });
}
