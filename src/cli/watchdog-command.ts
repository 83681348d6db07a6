import { Command } from 'commander';
import { withConfigOption } from './config-option';

/** `outbox watchdog`: placeholder, replaced by the watchdog implementation (src/watchdog). */
export function watchdogCommand(): Command {
  return withConfigOption(new Command('watchdog').description('(not built yet)'));
}
