import { Command, Option } from 'commander';
import { describeConfig, renderConfigText } from '../config/describe';
import { loadCommandConfig, withConfigOption } from './config-option';
import { action } from './run-command';

/** `outbox config print`: the effective configuration, redacted, with where each value came from. */
export function configCommand(): Command {
  const print = withConfigOption(
    new Command('print').description(
      'Print the effective configuration (schema defaults < --config file < environment variables), one setting per line with its source ' +
        '(default, env <VAR>, file <path>). Passwords, secrets, tokens and credentials in URLs are printed as [redacted].',
    ),
  )
    .addOption(new Option('--format <format>', 'text for people, json for machines').choices(['text', 'json']).default('text'))
    .action(
      action(async (opts: { format: 'text' | 'json' }, command: Command) => {
        const settings = describeConfig(loadCommandConfig(command, []));
        const text = opts.format === 'json' ? `${JSON.stringify({ settings }, null, 2)}\n` : renderConfigText(settings);
        process.stdout.write(text);
      }),
    );
  return new Command('config').description('Inspect the configuration (see docs/configuration.md).').addCommand(print);
}
