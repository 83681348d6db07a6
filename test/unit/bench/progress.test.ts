import type { Logger } from '../../../src/log';
import { createProgress } from '../../../scripts/bench/progress';

describe('progress without a terminal', () => {
  afterEach(() => jest.useRealTimers());

  it('logs one line per second per phase, and the final count once', () => {
    jest.useFakeTimers({ now: 10_000 });
    const lines: string[] = [];
    const log = { info: (msg: string) => lines.push(msg) } as unknown as Logger;
    const phase = createProgress({ tty: false, log }).phase('cdc @500/s', 100, 'committed');
    phase.update(10, { handled: 5 });
    jest.setSystemTime(10_500);
    phase.update(20);
    jest.setSystemTime(11_100);
    phase.update(60, { handled: 40 });
    phase.update(100);
    phase.done();
    expect(lines).toEqual(['cdc @500/s: 10/100 committed; handled 5', 'cdc @500/s: 60/100 committed; handled 40', 'cdc @500/s: 100/100 committed']);
  });

  it('does not repeat a final line already logged', () => {
    const lines: string[] = [];
    const log = { info: (msg: string) => lines.push(msg) } as unknown as Logger;
    const phase = createProgress({ tty: false, log }).phase('watchdog', 1, 'measurement');
    phase.update(1);
    phase.done();
    expect(lines).toEqual(['watchdog: 1/1 measurement']);
  });
});
