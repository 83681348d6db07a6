import type { NamedOutbox } from '../config';
import { toOutboxError } from '../errors';
import type { Logger } from '../log';

/** One outbox's result in a command that handles several. */
export type OutboxOutcome<T> = { name: string; ok: true; value: T } | { name: string; ok: false; error: Error };

export interface EachOutboxOptions<T> {
  /** Print JSON: the value as the one-outbox command prints it, or `{ outboxes: [...] }` for several. */
  json: boolean;
  /** What --json prints of one value (default: the value). */
  jsonOf?: (value: T) => unknown;
  /** The text lines of one outbox's value, as the one-outbox command prints them. */
  lines: (value: T, outbox: NamedOutbox) => string[];
  /** The exit code of one value (default 0); the command exits with the worst. */
  exitCode?: (value: T) => number;
  /** The exit code of an outbox that failed (default 1). */
  failedCode?: number;
  /** Run the outboxes side by side (reads: status, checks) or one after another (writes: deploy, provision). */
  concurrent: boolean;
}

/**
 * Runs `run` for each outbox, each with a logger naming it. One outbox that fails (or throws) never stops
 * the others: its error is printed under its name, the rest carry on, and the exit code is the worst. With
 * one unnamed outbox (no `outboxes` section) it is the plain one-outbox command: its error is thrown.
 */
export async function runEachOutbox<T>(outboxes: readonly NamedOutbox[], logger: Logger, run: (outbox: NamedOutbox, log: Logger) => Promise<T>, options: EachOutboxOptions<T>): Promise<number> {
  const [only] = outboxes;
  if (outboxes.length === 1 && only && only.name === '') {
    const value = await run(only, logger);
    process.stdout.write(options.json ? `${JSON.stringify(options.jsonOf ? options.jsonOf(value) : value, null, 2)}\n` : `${options.lines(value, only).join('\n')}\n`);
    return options.exitCode?.(value) ?? 0;
  }
  const one = async (outbox: NamedOutbox): Promise<OutboxOutcome<T>> => {
    try {
      return { name: outbox.name, ok: true, value: await run(outbox, logger.child({ outbox: outbox.name })) };
    } catch (error) {
      return { name: outbox.name, ok: false, error: toOutboxError(error) };
    }
  };
  const outcomes: Array<OutboxOutcome<T>> = [];
  if (options.concurrent) outcomes.push(...(await Promise.all(outboxes.map(one))));
  else for (const outbox of outboxes) outcomes.push(await one(outbox));
  process.stdout.write(options.json ? `${JSON.stringify({ outboxes: outcomes.map((o) => jsonOutcome(o, options.jsonOf)) }, null, 2)}\n` : outcomes.map((o) => textOutcome(o, outboxes, options)).join('\n'));
  const failed = outcomes.filter((o) => !o.ok).map((o) => o.name);
  if (failed.length > 0) process.stderr.write(`outbox: ${failed.length} of ${outcomes.length} outboxes failed: ${failed.join(', ')} (the others ran to the end)\n`);
  return Math.max(0, ...outcomes.map((o) => (o.ok ? (options.exitCode?.(o.value) ?? 0) : (options.failedCode ?? 1))));
}

function jsonOutcome<T>(o: OutboxOutcome<T>, jsonOf: ((value: T) => unknown) | undefined): unknown {
  if (o.ok) return { outbox: o.name, ok: true, result: jsonOf ? jsonOf(o.value) : o.value };
  const error = toOutboxError(o.error);
  return { outbox: o.name, ok: false, error: { code: error.code, message: error.message } };
}

function textOutcome<T>(o: OutboxOutcome<T>, outboxes: readonly NamedOutbox[], options: EachOutboxOptions<T>): string {
  const outbox = outboxes.find((x) => x.name === o.name) as NamedOutbox;
  const body = o.ok ? options.lines(o.value, outbox) : [`FAILED: ${toOutboxError(o.error).message}`, `(error code ${toOutboxError(o.error).code}; see docs/errors.md)`];
  return `== outbox ${o.name} ==\n${body.map((line) => `  ${line.replace(/\n/g, '\n  ')}`).join('\n')}\n`;
}
