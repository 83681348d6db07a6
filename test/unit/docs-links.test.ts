import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { slugs, withoutCode } from '../support/markdown';

/**
 * The README is a front door into docs/: every relative link in README.md, CONTRIBUTING.md and docs/
 * must name a file that exists and, with a #fragment, a heading that exists in it (GitHub's slugs).
 */
const root = resolve(__dirname, '../..');
const pages = ['README.md', 'CONTRIBUTING.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

describe('documentation links', () => {
  it('the README stays a front door (at most 15 KB)', () => {
    expect(readFileSync(join(root, 'README.md')).length).toBeLessThanOrEqual(15 * 1024);
  });

  it.each(pages)('%s links only to files and headings that exist', (page) => {
    const text = withoutCode(readFileSync(join(root, page), 'utf8'));
    const broken: string[] = [];
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (!target || /^(https?:|mailto:)/.test(target)) continue;
      const [path, fragment] = target.split('#') as [string, string | undefined];
      const file = path === '' ? join(root, page) : resolve(dirname(join(root, page)), path);
      if (!existsSync(file)) {
        broken.push(`${target} (no such file)`);
        continue;
      }
      if (fragment && file.endsWith('.md') && !slugs(readFileSync(file, 'utf8')).has(fragment)) broken.push(`${target} (no such heading)`);
    }
    expect(broken).toEqual([]);
  });
});
