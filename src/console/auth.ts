import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { ConsoleConfig } from '../config';

/**
 * Who may use the console, from `console.token` and `console.username`/`password` (the environment:
 * OUTBOX_CONSOLE_TOKEN, OUTBOX_CONSOLE_USERNAME, OUTBOX_CONSOLE_PASSWORD):
 *
 * - `Authorization: Bearer <token>` or `Basic <user:password>` on any request (scripts, or a browser
 *   that sends basic auth);
 * - in the page, the token typed into its sign-in form: the console answers with a session cookie
 *   (HttpOnly, SameSite=Strict), kept in memory for `console.sessionTtlMs`.
 *
 * Every action also needs the CSRF token of its credentials (`x-csrf-token`): an HMAC, under a key
 * made at start, of the session or the credentials' name. The page reads it from /api/session, which
 * only a same-origin script can read; a form or a link from another site cannot send it.
 */

export const SESSION_COOKIE = 'outbox_console_session';

/**
 * The session cookie's name on the port the request came in on: cookies are kept per host, not per
 * port, so two consoles on one machine (a read-write and a read-only one) would otherwise overwrite
 * each other's session.
 */
export const sessionCookieName = (req: IncomingMessage): string => `${SESSION_COOKIE}_${req.socket.localPort ?? 0}`;

export interface Operator {
  /** Named in the audit log: the basic-auth username, or `token`. */
  name: string;
  via: 'bearer' | 'basic' | 'session' | 'none';
}

export interface Authenticated {
  operator: Operator;
  /** What the CSRF token is bound to. */
  csrfSubject: string;
}

export interface ConsoleAuth {
  /** Credentials are configured: without them the console is read-only and open on loopback only. */
  readonly configured: boolean;
  readonly methods: ReadonlyArray<'token' | 'basic'>;
  /** The operator of a request (its Authorization header, else its session cookie); undefined when none is valid. */
  authenticate(req: IncomingMessage): Authenticated | undefined;
  /** A session for the token typed into the sign-in form, or undefined when it is not the token. */
  signIn(token: string): { sessionId: string; maxAgeSeconds: number } | undefined;
  signOut(req: IncomingMessage): void;
  csrfToken(auth: Authenticated): string;
  csrfValid(auth: Authenticated, given: string | undefined): boolean;
}

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();
/** Compares two secrets in time that does not depend on where they differ (digests have one length). */
const same = (a: string, b: string) => timingSafeEqual(digest(a), digest(b));

export function cookieValue(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export function createConsoleAuth(settings: Pick<ConsoleConfig, 'token' | 'username' | 'password' | 'sessionTtlMs'>, now: () => number = Date.now): ConsoleAuth {
  const key = randomBytes(32);
  const sessions = new Map<string, number>();
  const methods = [...(settings.token ? (['token'] as const) : []), ...(settings.username && settings.password ? (['basic'] as const) : [])];
  const sessionOf = (req: IncomingMessage): string | undefined => {
    const id = cookieValue(req, sessionCookieName(req));
    if (!id) return undefined;
    const expires = sessions.get(id);
    if (expires === undefined) return undefined;
    if (expires <= now()) {
      sessions.delete(id);
      return undefined;
    }
    return id;
  };

  return {
    configured: methods.length > 0,
    methods,
    authenticate(req) {
      const header = req.headers.authorization ?? '';
      const [scheme, value = ''] = header.split(/\s+/, 2) as [string, string?];
      if (/^bearer$/i.test(scheme) && settings.token) {
        return same(value, settings.token) ? { operator: { name: 'token', via: 'bearer' }, csrfSubject: 'bearer' } : undefined;
      }
      if (/^basic$/i.test(scheme) && settings.username && settings.password) {
        const decoded = Buffer.from(value, 'base64').toString('utf8');
        const colon = decoded.indexOf(':');
        const user = colon < 0 ? decoded : decoded.slice(0, colon);
        const password = colon < 0 ? '' : decoded.slice(colon + 1);
        // Both compared, always: the time taken says nothing about which one was wrong.
        const ok = [same(user, settings.username), same(password, settings.password)].every(Boolean);
        return ok ? { operator: { name: settings.username, via: 'basic' }, csrfSubject: `basic:${settings.username}` } : undefined;
      }
      if (header) return undefined;
      const session = sessionOf(req);
      if (session) return { operator: { name: 'token', via: 'session' }, csrfSubject: `session:${session}` };
      return undefined;
    },
    signIn(token) {
      if (!settings.token || !same(token, settings.token)) return undefined;
      for (const [id, expires] of sessions) if (expires <= now()) sessions.delete(id);
      const sessionId = randomBytes(32).toString('base64url');
      sessions.set(sessionId, now() + settings.sessionTtlMs);
      return { sessionId, maxAgeSeconds: Math.floor(settings.sessionTtlMs / 1000) };
    },
    signOut(req) {
      const id = cookieValue(req, sessionCookieName(req));
      if (id) sessions.delete(id);
    },
    csrfToken: (auth) => createHmac('sha256', key).update(auth.csrfSubject).digest('base64url'),
    csrfValid(auth, given) {
      if (!given) return false;
      return same(given, createHmac('sha256', key).update(auth.csrfSubject).digest('base64url'));
    },
  };
}
