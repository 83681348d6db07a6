import type { Pool } from 'pg';
import { isOutboxError } from '../errors';
import { CREDENTIAL_ERROR_CODES } from '../errors/credential-codes';
import { credentialFailure, isCredentialFailure } from '../errors/credentials';
import type { RouterEventName } from './types';

/**
 * A router that cannot authenticate (a wrong or rotated password, a missing ACL, an untrusted
 * certificate) waits: the failure is the infrastructure's, never the record's, so nothing is
 * dead-lettered and no offset moves past what was applied. This file tells those failures apart and
 * keeps the current one for /readyz, so "not ready" says which hop refused whom, and how to fix it.
 */

/** A database failure as the router reports it: a refused credential or TLS as DB_AUTH_FAILED / DB_TLS_FAILED, else as it is. */
export function classifyDatabaseFailure(error: unknown, pool: Pool | undefined): unknown {
  if (isOutboxError(error) || !pool) return error;
  const o = (pool as unknown as { options?: { host?: string; port?: number; database?: string; user?: string; ssl?: unknown } }).options ?? {};
  return credentialFailure(error, { hop: 'postgres', target: `${o.host ?? '?'}:${o.port ?? '?'}/${o.database ?? '?'}`, ...(o.user ? { principal: o.user } : {}), tls: Boolean(o.ssl) }, 'applying records') ?? error;
}

/** The refusal now keeping the router from working, as /readyz shows it. */
export interface CurrentRefusal {
  code: string;
  hop: string;
  principal?: string;
  message: string;
  /** Since the first failure of this kind in a row. */
  seconds: number;
}

export interface CredentialWatch {
  /** A credential failure seen (an OutboxError of src/errors/credential-codes.ts); anything else is ignored. */
  failed(error: unknown): void;
  /** Work went through: the refusal is over. */
  cleared(): void;
  /** Pass as (one of) the router's event listeners: `router.wait` carries the failure's code and error; an applied record or a joined group clears it. */
  onEvent(name: RouterEventName, data: Record<string, unknown>): void;
  current(): CurrentRefusal | undefined;
}

/** What `router.wait` carries of a credential failure (waitForInfrastructure puts it there). */
export function refusalFields(error: unknown): Record<string, unknown> {
  if (!isCredentialFailure(error) || !isOutboxError(error)) return {};
  return { hop: error.details.hop, ...(typeof error.details.principal === 'string' ? { principal: error.details.principal } : {}) };
}

export function createCredentialWatch(now: () => number = Date.now): CredentialWatch {
  let refusal: (Omit<CurrentRefusal, 'seconds'> & { sinceMs: number }) | undefined;
  const record = (code: string, hop: string, principal: unknown, message: string) => {
    const sinceMs = refusal?.code === code ? refusal.sinceMs : now();
    refusal = { code, hop, ...(typeof principal === 'string' ? { principal } : {}), message, sinceMs };
  };
  const cleared = () => {
    refusal = undefined;
  };
  return {
    failed(error) {
      if (isCredentialFailure(error) && isOutboxError(error)) record(error.code, String(error.details.hop ?? 'unknown'), error.details.principal, error.message);
    },
    cleared,
    onEvent(name, data) {
      if (name === 'router.wait' && (CREDENTIAL_ERROR_CODES as readonly unknown[]).includes(data.code)) record(String(data.code), String(data.hop ?? 'unknown'), data.principal, String(data.error ?? ''));
      else if (name === 'router.applied' || name === 'router.duplicate' || name === 'router.group-join') cleared();
    },
    current() {
      if (!refusal) return undefined;
      const { sinceMs, ...rest } = refusal;
      return { ...rest, seconds: Math.max(0, (now() - sinceMs) / 1000) };
    },
  };
}
