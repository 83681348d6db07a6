import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Actions } from '../../../src/console/actions';
import { IMPORT_MAP, loadPage } from '../../../src/console/assets';
import { createConsoleAuth } from '../../../src/console/auth';
import { createConsoleHandler, type ConsoleData } from '../../../src/console/server';

/** The console's HTTP rules on a loopback listener; the data and the actions are stand-ins (the browser test runs the real ones). */
const TOKEN = 'unit-test-token-0123456789';

interface Reply {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

async function serve(options: { readOnly?: boolean; basicOnly?: boolean } = {}) {
  const runs: Array<{ body: unknown; operator: string }> = [];
  const actions: Actions = {
    busy: () => false,
    run: async (body, context) => {
      runs.push({ body, operator: context.operator.name });
      return { ok: true };
    },
  };
  const data: ConsoleData = { overview: () => ({ overview: 1 }), series: () => ({}), deadLetters: async () => ({}), parked: async () => ({}), audit: () => ({}) };
  const auth = createConsoleAuth(options.basicOnly ? { username: 'ops', password: 'password-1', sessionTtlMs: 60_000 } : { token: TOKEN, sessionTtlMs: 60_000 });
  const handler = createConsoleHandler({ page: loadPage(), auth, actions, data, readOnly: options.readOnly ?? false, hostAllowed: (host, port) => host === `127.0.0.1:${port}` });
  const server: Server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const call = (path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) =>
    new Promise<Reply>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path, method: init.method ?? 'GET', headers: init.headers }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      });
      req.on('error', reject);
      req.end(init.body);
    });
  return { call, runs, close: () => new Promise<void>((resolve) => server.close(() => resolve())), origin: `http://127.0.0.1:${port}` };
}

const json = { 'content-type': 'application/json' };
const bearer = { authorization: `Bearer ${TOKEN}` };

describe('console: the HTTP rules', () => {
  let s: Awaited<ReturnType<typeof serve>>;
  afterEach(() => s?.close());

  it('every response carries the strict CSP (the import map allowed by its hash) and the other security headers', async () => {
    s = await serve();
    for (const path of ['/', '/api/overview', '/assets/console.js', '/nope']) {
      const r = await s.call(path);
      expect(r.headers['content-security-policy']).toContain("default-src 'none'");
      expect(r.headers['content-security-policy']).toContain("require-trusted-types-for 'script'");
      expect(r.headers['x-content-type-options']).toBe('nosniff');
      expect(r.headers['x-frame-options']).toBe('DENY');
      expect(r.headers['cache-control']).toBe('no-store');
    }
    const page = await s.call('/');
    expect(page.body).toContain(`<script type="importmap">${IMPORT_MAP}</script>`);
    // The one inline script is the import map: every other script has a src.
    expect(page.body.match(/<script(?![^>]*\bsrc=)[^>]*>/g)).toEqual(['<script type="importmap">']);
  });

  it('reads need an operator; a Host the console does not answer to is refused', async () => {
    s = await serve();
    expect((await s.call('/api/overview')).status).toBe(401);
    const ok = await s.call('/api/overview', { headers: bearer });
    expect([ok.status, JSON.parse(ok.body)]).toEqual([200, { overview: 1 }]);
    expect((await s.call('/api/overview', { headers: { ...bearer, host: 'evil.example' } })).status).toBe(421);
  });

  it('an action needs credentials, the CSRF token, a same-origin request and JSON; then it runs as the operator', async () => {
    s = await serve();
    const session = JSON.parse((await s.call('/api/session', { headers: bearer })).body) as { csrfToken: string; authenticated: boolean };
    expect(session.authenticated).toBe(true);
    const body = JSON.stringify({ action: 'connector-pause' });
    const post = (headers: Record<string, string>, b = body) => s.call('/api/actions', { method: 'POST', headers, body: b });
    expect((await post(json)).status).toBe(401);
    expect((await post({ ...json, ...bearer })).status).toBe(403);
    expect((await post({ ...json, ...bearer, 'x-csrf-token': 'forged' })).status).toBe(403);
    expect((await post({ ...json, ...bearer, 'x-csrf-token': session.csrfToken, origin: 'http://evil.example' })).status).toBe(403);
    expect((await post({ ...json, ...bearer, 'x-csrf-token': session.csrfToken, 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect((await post({ ...bearer, 'x-csrf-token': session.csrfToken, 'content-type': 'text/plain' })).status).toBe(400);
    expect((await post({ ...json, ...bearer, 'x-csrf-token': session.csrfToken }, 'x'.repeat(20_000))).status).toBe(400);
    expect(s.runs).toEqual([]);
    const ok = await post({ ...json, ...bearer, 'x-csrf-token': session.csrfToken, origin: s.origin, 'sec-fetch-site': 'same-origin' });
    expect(ok.status).toBe(200);
    expect(s.runs).toEqual([{ body: { action: 'connector-pause' }, operator: 'token' }]);
  });

  it('read-only: no CSRF token is handed out and every action is refused', async () => {
    s = await serve({ readOnly: true });
    const session = JSON.parse((await s.call('/api/session', { headers: bearer })).body) as { csrfToken: string | null; readOnly: boolean };
    expect(session).toMatchObject({ csrfToken: null, readOnly: true });
    const r = await s.call('/api/actions', { method: 'POST', headers: { ...json, ...bearer }, body: '{"action":"connector-pause"}' });
    expect([r.status, JSON.parse(r.body).error.code]).toEqual([403, 'CONSOLE_FORBIDDEN']);
    expect(s.runs).toEqual([]);
  });

  it('the sign-in form: a session cookie that scripts cannot read and other sites do not send', async () => {
    s = await serve();
    const wrong = await s.call('/api/session', { method: 'POST', headers: json, body: JSON.stringify({ token: 'nope' }) });
    expect(wrong.status).toBe(401);
    const right = await s.call('/api/session', { method: 'POST', headers: json, body: JSON.stringify({ token: TOKEN }) });
    const cookie = String(right.headers['set-cookie']);
    expect(cookie).toMatch(/^outbox_console_session_\d+=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=60$/);
    const crossSite = await s.call('/api/session', { method: 'POST', headers: { ...json, origin: 'http://evil.example' }, body: JSON.stringify({ token: TOKEN }) });
    expect(crossSite.status).toBe(403);
    const overview = await s.call('/api/overview', { headers: { cookie: cookie.split(';')[0] as string } });
    expect(overview.status).toBe(200);
  });

  it('basic auth only: the page itself asks the browser for the credentials', async () => {
    s = await serve({ basicOnly: true });
    const r = await s.call('/');
    expect(r.status).toBe(401);
    expect(r.headers['www-authenticate']).toBe('Basic realm="outbox console", charset="UTF-8"');
    const ok = await s.call('/', { headers: { authorization: `Basic ${Buffer.from('ops:password-1').toString('base64')}` } });
    expect(ok.status).toBe(200);
  });
});
