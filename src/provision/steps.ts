import { pgCode } from '../db';
import { OutboxError } from '../errors';

/** Transient conflicts between concurrent provisioners of different databases (roles are shared). */
export const RETRY_CODES = new Set(['40001', '40P01', 'XX000']);

export interface StepContext {
  /** What provisioning was doing, as the report and docs/managed-postgres.md name it. */
  step: string;
  /** The role the step changes, if it changes one. */
  role?: string;
  /** The role db:provision connects as. */
  admin: string;
}

/**
 * Runs one provisioning step; a SQL error becomes PROVISION_FAILED naming the step, the role, the
 * SQLSTATE, PostgreSQL's message and detail, and the fix. Provisioning is one transaction, so the
 * first failure ends it: reporting that one (and never a later statement's 25P02 "current transaction
 * is aborted") is what tells the user what is wrong.
 */
export async function atStep<T>(context: StepContext, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (error) {
    throw stepFailure(error, context);
  }
}

/** The SQLSTATE of a raw pg error or of a PROVISION_FAILED made from one. */
export function sqlState(error: unknown): string | undefined {
  if (error instanceof OutboxError) return typeof error.details.code === 'string' ? error.details.code : undefined;
  return pgCode(error);
}

export function stepFailure(error: unknown, { step, role, admin }: StepContext): unknown {
  const code = pgCode(error);
  if (!code) return error;
  const detail = (error as { detail?: string }).detail;
  const fix = fixFor(code, step, role, admin);
  return new OutboxError(
    'PROVISION_FAILED',
    `db:provision failed at step "${step}"${role ? ` for role ${role}` : ''}, connected as ${admin} (SQLSTATE ${code}): ${(error as Error).message}` +
      `${detail ? ` (${detail})` : ''}. ${fix} Everything was rolled back; nothing was changed.`,
    { cause: error, retriable: RETRY_CODES.has(code), details: { code, step, ...(role ? { role } : {}) } },
  );
}

function fixFor(code: string, step: string, role: string | undefined, admin: string): string {
  if (RETRY_CODES.has(code)) return 'Another provisioner changed the shared roles at the same time: run db:provision again.';
  if (code === '42501' && role && ['set password', 'set role attributes'].includes(step)) {
    return (
      `Since PostgreSQL 16 a CREATEROLE admin may change only roles it administers, and only the attributes it has itself: ` +
      `as a superuser or the provider's admin, run GRANT ${role} TO ${admin} WITH ADMIN OPTION (or remove from ${role} the attribute named above), ` +
      `or drop ${role} so that db:provision creates it.`
    );
  }
  if (code === '42501') return `Role ${admin} lacks a right this step needs (see the detail above): connect as an admin role that has it (PGUSER); docs/managed-postgres.md lists what each provider's admin can do.`;
  if (code === '42P07' || code === '42710') return 'An object with the configured name exists but is not recorded as ours: choose other names (OUTBOX_TABLE, OUTBOX_PUBLICATION, …) or remove the stale object.';
  return 'Read PostgreSQL\'s message above; docs/errors.md (PROVISION_FAILED) lists the common causes.';
}
