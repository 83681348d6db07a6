import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { assetFiles, loadPage } from '../../../src/console/assets';
import { parseActionRequest } from '../../../src/console/actions';

const web = join(__dirname, '../../../web');

describe('console: the page ships as it is served', () => {
  it('every file the page loads exists: its own and the three libraries from their packages', () => {
    for (const [url, file] of Object.entries(assetFiles())) expect([url, existsSync(file)]).toEqual([url, true]);
    const page = loadPage();
    expect(page.html.toString()).not.toContain('{{importMap}}');
    for (const src of page.html.toString().matchAll(/(?:src|href)="([^"]+)"/g)) expect(page.assets.has(src[1] as string)).toBe(true);
  });

  it('the page\'s code never writes HTML from strings nor evaluates them', () => {
    for (const file of ['console.js', 'format.js']) {
      const code = readFileSync(join(web, file), 'utf8');
      for (const sink of ['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'dangerouslySetInnerHTML', 'document.write', 'eval(', 'new Function']) expect([sink, code.includes(sink)]).toEqual([sink, false]);
    }
  });
});

describe('console: an action request is checked, not trusted', () => {
  it('takes the known actions and string fields only', () => {
    expect(parseActionRequest({ action: 'replay', aggregateType: 'order', id: 'x', dryRun: true })).toMatchObject({ action: 'replay', aggregateType: 'order', id: 'x', dryRun: true });
    for (const bad of [null, [], 'replay', { action: 'drop-table' }, { action: 'replay', key: 1 }, { action: 'replay', key: 'k'.repeat(1_001) }, { action: 'replay', dryRun: 'yes' }]) {
      expect(() => parseActionRequest(bad)).toThrow(expect.objectContaining({ code: 'CONSOLE_REQUEST_INVALID' }));
    }
  });
});
