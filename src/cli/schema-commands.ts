import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, relative, resolve, sep } from 'node:path';
import { Command } from 'commander';
import { checkSchemas, createSchemaCatalogue, defaultSchemasDir, formatIncompatible, generateEventTypes, registerSchemas, type SchemaCheckResult } from '../codec';
import { OutboxError } from '../errors';
import { configFrom, withConfigOption } from './config-option';
import { action, loggerFor } from './run-command';

interface SchemaOpts {
  schemas: string;
  json: boolean;
}

const STATUS_LABEL: Record<SchemaCheckResult['status'], string> = {
  new: 'new',
  unchanged: 'unchanged',
  compatible: 'compatible',
  incompatible: 'INCOMPATIBLE',
};

function schemaCommand(name: string, description: string): Command {
  return withConfigOption(new Command(name).description(description))
    .option('--schemas <dir>', 'folder of <aggregate_type>/<EventType>.avsc files', defaultSchemasDir())
    .option('--json', 'print the result as JSON for scripts', false);
}

/** A wrong --schemas path would otherwise "succeed" with nothing to do (or, for the router, decode with the writer's schemas only). */
export function requireSchemas(dir: string): string {
  const schemasDir = resolve(dir);
  if (createSchemaCatalogue({ schemasDir }).list().length === 0) {
    throw new OutboxError(
      'SCHEMAS_NOT_FOUND',
      `No Avro schemas in ${schemasDir}: expected files like ${resolve(schemasDir, 'order', 'OrderCreated.avsc')} (<aggregate_type>/<EventType>.avsc). Pass --schemas <dir>.`,
      { details: { schemasDir } },
    );
  }
  return schemasDir;
}

export function schemaCommands(): Command[] {
  const register = schemaCommand(
    'schemas:register',
    'Register every schemas/<aggregate_type>/<EventType>.avsc in the schema registry under its subject ' +
      '(<topic>-<record full name>, e.g. outbox.event.order-dev.outboxrouter.order.OrderCreated). Idempotent: unchanged schemas keep their id. ' +
      'Exits 1, naming the fields, if the registry refuses a schema as incompatible.',
  ).action(
    action(async (opts: SchemaOpts, command: Command) => {
      const schemasDir = requireSchemas(opts.schemas);
      const results = await registerSchemas(configFrom(command), { schemasDir, log: loggerFor(command) });
      if (opts.json) {
        process.stdout.write(`${JSON.stringify({ results }, null, 2)}\n`);
        return;
      }
      for (const r of results) {
        process.stdout.write(`${r.status.padEnd(11)} ${r.subject}  id ${r.id}${r.version ? ` version ${r.version}` : ''}\n`);
      }
      const added = results.filter((r) => r.status === 'registered').length;
      process.stdout.write(`${results.length} schema${results.length === 1 ? '' : 's'}: ${added} registered now, ${results.length - added} already registered.\n`);
    }),
  );

  const check = schemaCommand(
    'schemas:check',
    'Compare every local .avsc with the latest registered version of its subject (every version under a *_TRANSITIVE level), using the registry\'s compatibility check and a ' +
      'field-level analysis that names what breaks (e.g. "OrderCreated.channel: added without a default"). Registers nothing. ' +
      'Exits 0 when everything is compatible or new, 1 otherwise: run it in CI before `schemas:register`.',
  ).action(
    action(async (opts: SchemaOpts, command: Command) => {
      const schemasDir = requireSchemas(opts.schemas);
      const report = await checkSchemas(configFrom(command), { schemasDir, log: loggerFor(command) });
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
        return report.ok ? 0 : 1;
      }
      for (const r of report.results) {
        const against = r.status === 'new' ? 'not registered yet' : `${r.level}, against version ${r.registeredVersion}`;
        process.stdout.write(`${STATUS_LABEL[r.status].padEnd(12)} ${r.subject} (${against})\n`);
      }
      const count = (status: SchemaCheckResult['status']) => report.results.filter((r) => r.status === status).length;
      process.stdout.write(
        `${report.results.length} subjects in ${report.registry}: ${count('compatible')} compatible, ${count('unchanged')} unchanged, ` +
          `${count('new')} new, ${count('incompatible')} incompatible.\n`,
      );
      if (report.ok) return 0;
      process.stdout.write(
        `\nIncompatible:\n${formatIncompatible(report.results)}\n` +
          'Fix: give every added field a default, keep removed enum symbols and use only types Avro promotes, ' +
          'or publish the change as a new event type (a new .avsc); then rerun `outbox schemas:check`.\n',
      );
      return 1;
    }),
  );

  const types = new Command('schemas:types')
    .description(
      'Write TypeScript types for the payloads of every <aggregate_type>/<EventType>.avsc, as the codec decodes them, and an EventMap ' +
        '(aggregate type → event type → payload) for createOutboxWriter<EventMap>, createRouter<EventMap> and Handlers<EventMap>: ' +
        'a misspelled event type or a wrong payload is then a compile error (docs/library.md, "Typed events"). ' +
        'With --check, writes nothing and exits 1 if the file is missing or differs from what would be written: run it in CI.',
    )
    .option('--schemas <dir>', 'folder of <aggregate_type>/<EventType>.avsc files', defaultSchemasDir())
    .option('--out <file>', 'the TypeScript file to write', 'outbox-events.ts')
    .option('--check', 'write nothing; exit 1 if the file is not up to date', false)
    .action(
      action(async (opts: { schemas: string; out: string; check: boolean }) => {
        const schemasDir = requireSchemas(opts.schemas);
        const out = resolve(opts.out);
        const text = eventTypesFile(schemasDir, out);
        const current = existsSync(out) ? readFileSync(out, 'utf8') : undefined;
        if (opts.check) {
          if (current === text) {
            process.stdout.write(`${opts.out} is up to date with ${schemasDir}.\n`);
            return 0;
          }
          process.stdout.write(
            `${opts.out} ${current === undefined ? 'does not exist' : 'is out of date'}: it differs from what the schemas in ${schemasDir} generate. ` +
              `Run \`outbox schemas:types --schemas ${opts.schemas} --out ${opts.out}\` and commit the result.\n`,
          );
          return 1;
        }
        if (current !== text) writeFileSync(out, text);
        const count = createSchemaCatalogue({ schemasDir }).list().length;
        process.stdout.write(`${current === text ? 'unchanged' : 'wrote'} ${opts.out}: ${count} event type${count === 1 ? '' : 's'} from ${schemasDir}.\n`);
        return 0;
      }),
    );

  return [register, check, types];
}

/** The generated file's text; its header names the schemas folder relative to the file, so it is the same on every machine. */
export function eventTypesFile(schemasDir: string, outFile: string): string {
  const source = relative(dirname(outFile), schemasDir).split(sep).join('/') || '.';
  return generateEventTypes(createSchemaCatalogue({ schemasDir }).list(), { source });
}
