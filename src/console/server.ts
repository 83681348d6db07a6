import type { IncomingMessage, ServerResponse } from 'node:http';
import { isOutboxError, OutboxError, toOutboxError, type ErrorCode } from '../errors';
import type { Logger } from '../log';
import type { Actions } from './actions';
import type { Page } from './assets';
import { sessionCookieName, type Authenticated, type ConsoleAuth } from './auth';

/** What the API reads: each answers plain JSON data, never anything of the config's secrets. */
export interface ConsoleData {
  overview(): unknown;
  series(): unknown;
  deadLetters(query: URLSearchParams): Promise<unknown>;
  parked(): Promise<unknown>;
  audit(): unknown;
}

export interface ConsoleHandlerOptions {
  page: Page;
  auth: ConsoleAuth;
  actions: Actions | undefined;
  data: ConsoleData;
  readOnly: boolean;
  /**
   * Whether a request's Host header names this console (DNS rebinding: another name pointing at a
   * loopback console is refused); given the header and the port the request came in on.
   */
  hostAllowed: (host: string, localPort: number | undefined) => boolean;
  logger?: Logger;
}

const STATUS: Partial<Record<ErrorCode, number>> = {
  CONSOLE_UNAUTHENTICATED: 401,
  CONSOLE_FORBIDDEN: 403,
  CONSOLE_BUSY: 409,
  CONSOLE_REQUEST_INVALID: 400,
  FLAG_INVALID: 400,
  PARKED_NOT_FOUND: 404,
  DLQ_TOPIC_MISSING: 404,
  CONSUMER_NAME_REQUIRED: 400,
};

const BODY_LIMIT = 16 * 1024;

/** Headers of every console response: no caching, no sniffing, no framing, no referrer, the strict CSP. */
function secure(res: ServerResponse, csp: string): void {
  res.setHeader('content-security-policy', csp);
  res.setHeader('x-content-type-options', 'nosniff');
  res.setHeader('x-frame-options', 'DENY');
  res.setHeader('referrer-policy', 'no-referrer');
  res.setHeader('cross-origin-opener-policy', 'same-origin');
  res.setHeader('cross-origin-resource-policy', 'same-origin');
  res.setHeader('permissions-policy', 'camera=(), microphone=(), geolocation=()');
  res.setHeader('cache-control', 'no-store');
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
}

function fail(res: ServerResponse, error: unknown): void {
  const e = toOutboxError(error);
  send(res, STATUS[e.code] ?? (e.retriable ? 503 : 500), { error: { code: e.code, message: e.message } });
}

const refuse = (code: ErrorCode, message: string) => new OutboxError(code, message);

async function readJson(req: IncomingMessage): Promise<unknown> {
  if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) throw refuse('CONSOLE_REQUEST_INVALID', 'Send the request as application/json.');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > BODY_LIMIT) throw refuse('CONSOLE_REQUEST_INVALID', `The request body is larger than ${BODY_LIMIT} bytes.`);
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    throw refuse('CONSOLE_REQUEST_INVALID', 'The request body is not valid JSON.');
  }
}

/**
 * A request that changes something must come from the console's own page: a browser sends Origin (and
 * Sec-Fetch-Site) on every POST, and a page of another site cannot make them say this origin. A client
 * that sends neither (curl, a script) is no browser, so no other site's page can be behind it.
 */
function sameOrigin(req: IncomingMessage): boolean {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin') return false;
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

/**
 * The console's requests, after the probes (/livez, /readyz, /healthz, /metrics) of the service
 * runtime: the page and its files, the JSON API under /api/, and the actions under /api/actions.
 * Reading needs an operator when credentials are configured; every action needs one, its CSRF token,
 * a same-origin request, and a console not in read-only mode.
 */
export function createConsoleHandler(options: ConsoleHandlerOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const { page, auth } = options;
  const basicOnly = auth.methods.length === 1 && auth.methods[0] === 'basic';

  const requireAuth = (req: IncomingMessage): Authenticated => {
    const who = auth.authenticate(req);
    if (who) return who;
    if (!auth.configured) return { operator: { name: 'anonymous', via: 'none' }, csrfSubject: 'anonymous' };
    throw refuse('CONSOLE_UNAUTHENTICATED', `Sign in first: ${auth.methods.map((m) => (m === 'token' ? 'the console token (OUTBOX_CONSOLE_TOKEN), as Authorization: Bearer or in the page' : 'basic auth (OUTBOX_CONSOLE_USERNAME/OUTBOX_CONSOLE_PASSWORD)')).join(', or ')}.`);
  };

  async function route(req: IncomingMessage, res: ServerResponse, path: string, query: URLSearchParams): Promise<void> {
    const method = req.method ?? 'GET';
    if (method === 'GET' && (path === '/' || path === '/index.html')) {
      if (basicOnly && !auth.authenticate(req)) {
        res.writeHead(401, { 'www-authenticate': 'Basic realm="outbox console", charset="UTF-8"', 'content-type': 'text/plain; charset=utf-8' }).end('Sign in with the console credentials.\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page.html);
      return;
    }
    if (method === 'GET' && path === '/favicon.ico') {
      res.writeHead(204).end();
      return;
    }
    const asset = method === 'GET' ? page.assets.get(path) : undefined;
    if (asset) {
      res.writeHead(200, { 'content-type': asset.type }).end(asset.body);
      return;
    }
    if (path === '/api/session') {
      if (method === 'GET') {
        const who = auth.authenticate(req);
        const signedIn = who ?? (auth.configured ? undefined : requireAuth(req));
        send(res, 200, {
          authenticated: Boolean(signedIn),
          operator: signedIn?.operator.name ?? null,
          methods: auth.methods,
          readOnly: options.readOnly,
          csrfToken: signedIn && !options.readOnly ? auth.csrfToken(signedIn) : null,
        });
        return;
      }
      if (method === 'POST') {
        if (!sameOrigin(req)) throw refuse('CONSOLE_FORBIDDEN', 'Sign-in is accepted from the console\'s own page only.');
        const body = (await readJson(req)) as { token?: unknown };
        const session = typeof body?.token === 'string' ? auth.signIn(body.token) : undefined;
        if (!session) {
          // A wrong token costs the guesser time; the operator barely notices.
          await new Promise((r) => setTimeout(r, 500));
          throw refuse('CONSOLE_UNAUTHENTICATED', auth.methods.includes('token') ? 'That is not the console token.' : 'This console takes no token: sign in with basic auth.');
        }
        res.setHeader('set-cookie', `${sessionCookieName(req)}=${session.sessionId}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${session.maxAgeSeconds}`);
        send(res, 200, { authenticated: true });
        return;
      }
      if (method === 'DELETE') {
        if (!sameOrigin(req)) throw refuse('CONSOLE_FORBIDDEN', 'Sign-out is accepted from the console\'s own page only.');
        auth.signOut(req);
        res.setHeader('set-cookie', `${sessionCookieName(req)}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0`);
        send(res, 200, { authenticated: false });
        return;
      }
    }
    if (path === '/api/actions') {
      if (method !== 'POST') {
        res.writeHead(405, { allow: 'POST' }).end();
        return;
      }
      if (!sameOrigin(req)) throw refuse('CONSOLE_FORBIDDEN', 'Actions are accepted from the console\'s own page only (Origin/Sec-Fetch-Site of another site).');
      const who = requireAuth(req);
      if (options.readOnly || !options.actions) throw refuse('CONSOLE_FORBIDDEN', 'This console is read-only (--read-only, or no credentials configured): it takes no actions.');
      if (!auth.csrfValid(who, headerOf(req, 'x-csrf-token'))) throw refuse('CONSOLE_FORBIDDEN', 'Missing or wrong CSRF token (x-csrf-token): reload the page; scripts read it from GET /api/session.');
      const body = await readJson(req);
      const result = await options.actions.run(body, { operator: who.operator, address: req.socket.remoteAddress ?? null });
      send(res, 200, result);
      return;
    }
    if (method === 'GET' && path.startsWith('/api/')) {
      requireAuth(req);
      switch (path) {
        case '/api/overview':
          return send(res, 200, options.data.overview());
        case '/api/series':
          return send(res, 200, options.data.series());
        case '/api/dead-letters':
          return send(res, 200, await options.data.deadLetters(query));
        case '/api/parked':
          return send(res, 200, await options.data.parked());
        case '/api/audit':
          return send(res, 200, options.data.audit());
      }
    }
    send(res, 404, { error: { code: 'CONSOLE_REQUEST_INVALID', message: `No such page or API: ${method} ${path}.` } });
  }

  return (req, res) => {
    secure(res, page.csp);
    const host = req.headers.host ?? '';
    if (!options.hostAllowed(host.toLowerCase(), req.socket.localPort)) {
      send(res, 421, { error: { code: 'CONSOLE_FORBIDDEN', message: `This console does not answer to Host ${JSON.stringify(host.slice(0, 100))}: open it by its address (or localhost), or add the name to console.allowedHosts.` } });
      return;
    }
    const url = new URL(req.url ?? '/', 'http://console.invalid');
    route(req, res, url.pathname, url.searchParams).catch((error: unknown) => {
      if (!isOutboxError(error)) options.logger?.error({ event: 'console.request-failed', err: error, path: url.pathname }, 'console: request failed');
      if (res.headersSent) res.end();
      else fail(res, error);
    });
  };
}

function headerOf(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}
