/** test/support/until.ts: the tests' one polling wait. */
import { until, waitsUpTo } from '../../support/until';

describe('until', () => {
  it('with ok: returns the first value ok accepts', async () => {
    let n = 0;
    expect(await waitsUpTo(1_000, 1)('n reaches 3', () => ++n, (v) => v >= 3)).toBe(3);
  });

  it('without ok: returns the first value that is not undefined, null or false', async () => {
    const values: Array<string | undefined | null | false> = [undefined, null, false, 'x'];
    expect(await until('a value', () => values.shift())).toBe('x');
    expect(await until('zero counts as found', () => 0)).toBe(0);
  });

  it('fails after the timeout with what it waited for and the last value, never hangs', async () => {
    await expect(waitsUpTo(30, 5)('never', () => false)).rejects.toThrow(/^never: not reached within 30 ms; last: false$/);
    await expect(until('never either', () => 1, (v) => v > 1, 20)).rejects.toThrow('never either: not reached within 20 ms; last: 1');
  });
});
