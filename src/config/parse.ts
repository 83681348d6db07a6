import type { z } from 'zod';
import { OutboxError, type ErrorCode } from '../errors';
import { redactConfig, SECRET_KEY, withoutUserinfo } from './redact';

/** Where the input being parsed came from, for the error message. */
export interface ParseSource {
  /** The first line of the error, e.g. "Invalid relay settings; the relay did not start". */
  heading: string;
  /** Put before each field's path, e.g. "relay.". */
  prefix?: string;
  /** What set a field (" (from PGPORT)", " (in outbox.yaml)"), by its dotted path; '' when unknown. */
  origin?: (path: string) => string;
  /** Put after a field's problem: what its source takes ("PGPORT takes a number such as 30000"); '' for none. */
  hint?: (path: string) => string;
  /** Leave the rejected values out of the message: all of them, or those whose path this returns true for. */
  hideValues?: boolean | ((path: string) => boolean);
  /** How a problem of the whole input is named; default "(top level)". */
  root?: string;
  /** At most this many problems are listed (default: all). */
  maxProblems?: number;
  /** The error's code; default CONFIG_INVALID. */
  code?: ErrorCode;
}

/**
 * The one way settings are validated: `schema` parses `input` or the call throws CONFIG_INVALID (or
 * `source.code`) listing every bad field with where it came from and the value it got (secrets and
 * credentials never shown).
 */
export function parse<S extends z.ZodType>(schema: S, input: unknown, source: ParseSource): z.output<S> {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.slice(0, source.maxProblems).map((issue) => {
    const path = issue.path.map(String).join('.');
    const value = issue.path.reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key as string], input);
    // Unknown keys: the issue sits on the enclosing section, whose value may hold secrets; name the keys only.
    const hidden = (typeof source.hideValues === 'function' ? source.hideValues(path) : source.hideValues) || issue.code === 'unrecognized_keys' || SECRET_KEY.test(path) || value === undefined || typeof value === 'function';
    const shown = hidden ? '' : ` — got ${withoutUserinfo(JSON.stringify(redactConfig(value)) ?? '')}`;
    const hint = source.hint?.(path);
    return `${source.prefix ?? ''}${path || (source.root ?? '(top level)')}${source.origin?.(path) ?? ''}: ${issue.message}${shown}${hint ? `; ${hint}` : ''}`;
  });
  throw new OutboxError(source.code ?? 'CONFIG_INVALID', `${source.heading}:\n${problems.map((p) => `  - ${p}`).join('\n')}`, {
    details: { fields: parsed.error.issues.map((i) => i.path.join('.')) },
  });
}
