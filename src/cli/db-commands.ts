import { Command } from 'commander';
import { provision } from '../provision';
import { loadCommandOutboxes, withConfigOption } from './config-option';
import { runEachOutbox } from './each-outbox';
import { action, loggerFor } from './run-command';

export function dbCommands(): Command[] {
  const provisionCommand = withConfigOption(
    new Command('db:provision').description(
      'Prepare PostgreSQL for the outbox (idempotent): preflight checks (wal_level, free slots and WAL senders, version, rights), ' +
        'then in one locked transaction the numbered migrations (outbox, inbox, heartbeat tables, publication) and the CDC, application, monitoring, router and relay roles, their grants, and the size and topic-name limits of outbox rows. ' +
        'Off the local stack, a role is created only with its password set (OUTBOX_*_PASSWORD); an existing role keeps its password unless one is set.',
    ),
  )
    .option('--dry-run', 'run everything inside a transaction, report it, and roll back', false)
    .option('--json', 'print the report as JSON', false)
    .action(
      action(async (opts: { dryRun: boolean; json: boolean }, command: Command) =>
        // One outbox after another: each in its own locked transaction, one's failure leaving the others done.
        runEachOutbox(loadCommandOutboxes(command, []), loggerFor(command), (outbox, log) => provision(outbox.config, { log, dryRun: opts.dryRun }), {
          json: opts.json,
          concurrent: false,
          lines: (report) => [
          `database ${report.database} (PostgreSQL ${report.preflight.version}, wal_level=${report.preflight.walLevel}, ` +
            `slots ${report.preflight.slots.used}/${report.preflight.slots.max}, WAL senders ${report.preflight.walSenders.used}/${report.preflight.walSenders.max})`,
          report.applied.length ? `applied: ${report.applied.join(', ')}` : `up to date (${report.alreadyApplied.length} migrations already applied)`,
          `publication ${report.publication === 'present' ? 'present' : `${report.publication} (it was missing or had drifted)`}`,
          report.rolesCreated.length ? `roles created: ${report.rolesCreated.join(', ')}` : 'roles: present',
          report.passwordsSet.length ? `passwords set: ${report.passwordsSet.join(', ')}` : 'passwords: unchanged',
          ...(report.passwordsKept.length ? [`passwords kept (none configured): ${report.passwordsKept.join(', ')}`] : []),
          report.limits.changed.length ? `limit constraints set: ${report.limits.changed.join(', ')}` : 'limit constraints: unchanged',
          ...(report.limits.notValidated.length ? [`NOT VALID (existing rows break them; new rows are checked): ${report.limits.notValidated.join(', ')}`] : []),
          report.dryRun ? 'DRY RUN: everything above was rolled back' : 'committed',
          ],
        }),
      ),
    );
  return [provisionCommand];
}
