import { Command } from 'commander';
import { withConfigOption } from './config-option';

/** `outbox status`: placeholder, replaced by the status implementation (src/status). */
export function statusCommand(): Command {
  return withConfigOption(new Command('status').description('(not built yet)'));
}
