import type { IncomingMessage } from 'node:http';
import { createConsoleAuth, sessionCookieName } from '../../../src/console/auth';

const TOKEN = 'a-token-of-at-least-16-chars';
const req = (headers: Record<string, string>, localPort = 9467) => ({ headers, socket: { localPort } }) as unknown as IncomingMessage;
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('console: operator authentication and CSRF tokens', () => {
  it('a bearer token, basic auth, or nothing', () => {
    const auth = createConsoleAuth({ token: TOKEN, username: 'ops', password: 'password-1', sessionTtlMs: 60_000 });
    expect(auth.methods).toEqual(['token', 'basic']);
    expect(auth.authenticate(req({ authorization: `Bearer ${TOKEN}` }))?.operator).toEqual({ name: 'token', via: 'bearer' });
    expect(auth.authenticate(req({ authorization: basic('ops', 'password-1') }))?.operator).toEqual({ name: 'ops', via: 'basic' });
    for (const authorization of [`Bearer ${TOKEN}x`, basic('ops', 'password-2'), basic('opz', 'password-1'), 'Digest x', 'Bearer']) {
      expect(auth.authenticate(req({ authorization }))).toBeUndefined();
    }
    expect(auth.authenticate(req({}))).toBeUndefined();
  });

  it('a sign-in with the token gives a session cookie, per port, that expires and signs out', () => {
    let now = 1_000;
    const auth = createConsoleAuth({ token: TOKEN, sessionTtlMs: 60_000 }, () => now);
    expect(auth.signIn('wrong')).toBeUndefined();
    const session = auth.signIn(TOKEN)!;
    expect(session.maxAgeSeconds).toBe(60);
    const cookie = `${sessionCookieName(req({}))}=${session.sessionId}`;
    expect(auth.authenticate(req({ cookie }))?.operator).toEqual({ name: 'token', via: 'session' });
    // Another console on another port of the same host has its own cookie name.
    expect(auth.authenticate(req({ cookie }, 9468))).toBeUndefined();
    // A wrong Authorization header is not rescued by a valid cookie.
    expect(auth.authenticate(req({ cookie, authorization: 'Bearer nope' }))).toBeUndefined();
    now += 60_001;
    expect(auth.authenticate(req({ cookie }))).toBeUndefined();
    const again = auth.signIn(TOKEN)!;
    const cookie2 = `${sessionCookieName(req({}))}=${again.sessionId}`;
    auth.signOut(req({ cookie: cookie2 }));
    expect(auth.authenticate(req({ cookie: cookie2 }))).toBeUndefined();
  });

  it('the CSRF token is bound to the credentials: another session\'s or a made-up one is refused', () => {
    const auth = createConsoleAuth({ token: TOKEN, sessionTtlMs: 60_000 });
    const a = auth.authenticate(req({ cookie: `${sessionCookieName(req({}))}=${auth.signIn(TOKEN)!.sessionId}` }))!;
    const b = auth.authenticate(req({ cookie: `${sessionCookieName(req({}))}=${auth.signIn(TOKEN)!.sessionId}` }))!;
    expect(auth.csrfValid(a, auth.csrfToken(a))).toBe(true);
    expect(auth.csrfValid(a, auth.csrfToken(b))).toBe(false);
    expect(auth.csrfValid(a, undefined)).toBe(false);
    expect(auth.csrfValid(a, 'x')).toBe(false);
    // A new process has a new key: old tokens die with it.
    expect(createConsoleAuth({ token: TOKEN, sessionTtlMs: 60_000 }).csrfValid(a, auth.csrfToken(a))).toBe(false);
  });

  it('without credentials nothing authenticates (the console is then read-only)', () => {
    const auth = createConsoleAuth({ sessionTtlMs: 60_000 });
    expect(auth.configured).toBe(false);
    expect(auth.signIn('anything')).toBeUndefined();
    expect(auth.authenticate(req({ authorization: 'Bearer anything' }))).toBeUndefined();
  });
});
