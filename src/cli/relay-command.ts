import { Command } from 'commander';
import { withConfigOption } from './config-option';

/** `outbox relay`: placeholder, replaced by the relay implementation (src/relay). */
export function relayCommand(): Command {
  return withConfigOption(new Command('relay').description('(not built yet)'));
}
