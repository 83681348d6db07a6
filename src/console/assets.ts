import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { PACKAGE_ROOT } from '../assets';

/**
 * The page's files, read once at start: the console's own (web/ in the package, plain ES modules, no
 * build step) and the three libraries it uses, served from their npm packages as they ship:
 * Preact (the view, 12 KB), its hooks, htm (tagged templates instead of JSX, so no compiler), and
 * uPlot (the charts, canvas, 50 KB). None of them evaluates strings as code or writes HTML from
 * strings, so the page runs under a CSP without 'unsafe-eval' or 'unsafe-inline', with Trusted Types
 * required (an innerHTML of a string would throw).
 */

export interface Asset {
  body: Buffer;
  type: string;
}

const TYPES: Record<string, string> = { '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8', '.html': 'text/html; charset=utf-8' };

const typeOf = (path: string) => TYPES[path.slice(path.lastIndexOf('.'))] ?? 'application/octet-stream';

/** A package's file by its path inside the package (the packages' `exports` do not list these). */
function packageFile(pkg: string, fromMain: string): string {
  return join(dirname(require.resolve(pkg)), fromMain);
}

/** URL path → file. The import map below names the vendor modules by these URLs. */
export function assetFiles(): Record<string, string> {
  const web = join(PACKAGE_ROOT, 'web');
  return {
    '/assets/console.js': join(web, 'console.js'),
    '/assets/format.js': join(web, 'format.js'),
    '/assets/console.css': join(web, 'console.css'),
    '/assets/vendor/preact.mjs': require.resolve('preact'),
    '/assets/vendor/hooks.mjs': require.resolve('preact/hooks'),
    '/assets/vendor/htm.mjs': packageFile('htm', 'htm.mjs'),
    '/assets/vendor/uPlot.iife.min.js': packageFile('uplot', 'uPlot.iife.min.js'),
    '/assets/vendor/uPlot.min.css': packageFile('uplot', 'uPlot.min.css'),
  };
}

/** The page's one inline script: the import map (a CSP hash allows exactly it). */
export const IMPORT_MAP = JSON.stringify({ imports: { preact: '/assets/vendor/preact.mjs', 'preact/hooks': '/assets/vendor/hooks.mjs', htm: '/assets/vendor/htm.mjs' } });

export interface Page {
  html: Buffer;
  assets: ReadonlyMap<string, Asset>;
  /** The Content-Security-Policy of every console response. */
  csp: string;
}

export function loadPage(): Page {
  const assets = new Map<string, Asset>();
  for (const [url, file] of Object.entries(assetFiles())) assets.set(url, { body: readFileSync(file), type: typeOf(file) });
  const html = readFileSync(join(PACKAGE_ROOT, 'web', 'index.html'), 'utf8').replace('{{importMap}}', IMPORT_MAP);
  const hash = createHash('sha256').update(IMPORT_MAP, 'utf8').digest('base64');
  const csp = [
    "default-src 'none'",
    `script-src 'self' 'sha256-${hash}'`,
    "style-src 'self'",
    "img-src 'self'",
    "connect-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "require-trusted-types-for 'script'",
    "trusted-types 'none'",
  ].join('; ');
  return { html: Buffer.from(html, 'utf8'), assets, csp };
}
