import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ERROR_CODES } from '../../src/errors';

/** docs/errors.md promises one row per code, in ERROR_CODES order: keep the promise checkable. */
describe('docs/errors.md', () => {
  const rows = readFileSync(join(__dirname, '../../docs/errors.md'), 'utf8')
    .split('\n')
    .map((line) => /^\| `([A-Z_]+)` \|/.exec(line)?.[1])
    .filter((code): code is string => code !== undefined);

  it('has exactly one row per error code, in ERROR_CODES order', () => {
    expect(rows).toEqual([...ERROR_CODES]);
  });
});
